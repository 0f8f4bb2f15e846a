import { describe, expect, it, vi } from "vitest";
import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { Composer } from "./Composer";
import { matchingSkills, skillQuery } from "./SkillMenu";
import { axeViolations } from "../test/axe";

const SKILLS = [
  { name: "deploy", description: "Ship it to production" },
  { name: "review", description: "Review the diff" },
  { name: "redeploy", description: "" },
];

function setup(loadSkills: () => Promise<typeof SKILLS>) {
  const onSend = vi.fn(async () => undefined);
  render(<Composer onSend={onSend} loadSkills={loadSkills} />);
  return { onSend, box: screen.getByRole("textbox", { name: "Message" }) };
}

describe("the composer's skill menu", () => {
  it("offers the session's skills after / and picks one with the keyboard", async () => {
    const loadSkills = vi.fn(async () => SKILLS);
    const { onSend, box } = setup(loadSkills);
    const user = userEvent.setup();
    await user.type(box, "hello");
    expect(screen.queryByRole("listbox")).toBeNull();
    expect(loadSkills).not.toHaveBeenCalled(); // asked for only after `/`
    await user.clear(box);
    await user.type(box, "/");
    const menu = await screen.findByRole("listbox", { name: "Skills" });
    expect(Array.from(menu.querySelectorAll("[role=option]")).map((o) => o.textContent)).toEqual([
      "/deploy Ship it to production",
      "/review Review the diff",
      "/redeploy",
    ]);
    expect(await axeViolations()).toEqual([]);

    await user.type(box, "de");
    const options = screen.getAllByRole("option");
    expect(options.map((o) => o.textContent)).toEqual(["/deploy Ship it to production", "/redeploy"]);
    expect(options[0]).toHaveAttribute("aria-selected", "true");
    expect(box).toHaveAttribute("aria-activedescendant", options[0]?.id);
    await user.keyboard("{ArrowDown}");
    expect(screen.getAllByRole("option")[1]).toHaveAttribute("aria-selected", "true");
    expect(box).toHaveAttribute("aria-activedescendant", options[1]?.id);
    await user.keyboard("{Enter}"); // picks; does not send
    expect(box).toHaveValue("/redeploy ");
    expect(onSend).not.toHaveBeenCalled();
    expect(screen.queryByRole("listbox")).toBeNull();
    expect(box).not.toHaveAttribute("aria-activedescendant");

    await user.type(box, "now{Enter}");
    expect(onSend).toHaveBeenCalledWith("/redeploy now", []);
    expect(loadSkills).toHaveBeenCalledTimes(1); // read once
  });

  it("picks with a click or Tab, and Escape closes it", async () => {
    const { box } = setup(async () => SKILLS);
    const user = userEvent.setup();
    await user.type(box, "/rev");
    await user.click(await screen.findByRole("option", { name: /review/ }));
    expect(box).toHaveValue("/review ");
    await user.clear(box);
    await user.type(box, "/d");
    await screen.findByRole("listbox");
    await user.keyboard("{Escape}");
    expect(screen.queryByRole("listbox")).toBeNull();
    expect(box).toHaveValue("/d");
    await user.type(box, "e{Tab}");
    expect(box).toHaveValue("/deploy ");
  });

  it("shows nothing when the skills cannot be read, and asks again at the next /", async () => {
    const loadSkills = vi
      .fn<() => Promise<typeof SKILLS>>()
      .mockRejectedValueOnce(new Error("409 sandbox_not_running"))
      .mockResolvedValueOnce(SKILLS);
    const { onSend, box } = setup(loadSkills);
    const user = userEvent.setup();
    await user.type(box, "/");
    await waitFor(() => expect(loadSkills).toHaveBeenCalledTimes(1));
    expect(screen.queryByRole("listbox")).toBeNull();
    await user.type(box, "x{Enter}"); // Enter sends as ever
    expect(onSend).toHaveBeenCalledWith("/x", []);
    expect(loadSkills).toHaveBeenCalledTimes(1); // not retried while the same `/` stands
    await waitFor(() => expect(box).toHaveValue(""));
    await user.type(box, "/");
    expect(await screen.findByRole("listbox")).toBeInTheDocument();
    expect(loadSkills).toHaveBeenCalledTimes(2);
  });

  it("reads a query only from a lone /word, and matches prefixes first", () => {
    expect(skillQuery("/")).toBe("");
    expect(skillQuery("/dep")).toBe("dep");
    expect(skillQuery("/dep now")).toBeNull();
    expect(skillQuery("say /dep")).toBeNull();
    expect(skillQuery("/a/b")).toBeNull();
    expect(matchingSkills(SKILLS, "DEP").map((s) => s.name)).toEqual(["deploy", "redeploy"]);
    const many = Array.from({ length: 30 }, (_, i) => ({ name: `s${i}`, description: "" }));
    expect(matchingSkills(many, "")).toHaveLength(8);
  });
});
