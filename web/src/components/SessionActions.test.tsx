import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { fakeApi, renderWithApi } from "../test/fakes";
import { SessionActions, actionsFor } from "./SessionActions";
import { StatusChip } from "./StatusChip";

describe("actionsFor", () => {
  it("offers what each state allows", () => {
    expect(actionsFor("Paused", false)).toEqual(["resume", "archive"]);
    expect(actionsFor("Active", false)).toEqual(["pause", "archive"]);
    expect(actionsFor("Failed", false)).toEqual(["retry", "archive"]);
    expect(actionsFor("Provisioning", false)).toEqual(["archive"]);
    expect(actionsFor("Archived", true)).toEqual(["unarchive"]);
  });
});

describe("SessionActions", () => {
  it("archives only after the confirm dialog, then re-syncs", async () => {
    const setSessionStatus = vi.fn(async () => ({}) as never);
    const onDone = vi.fn();
    renderWithApi(
      <SessionActions
        sessionId="s1"
        title="Lisbon"
        chip="Active"
        archived={false}
        onDone={onDone}
        onBusy={vi.fn()}
      />,
      fakeApi({ setSessionStatus }),
    );
    await userEvent.click(screen.getByRole("button", { name: "Archive" }));
    const dialog = screen.getByRole("dialog", { name: "Archive session" });
    expect(screen.getByRole("button", { name: "Cancel" })).toHaveFocus();
    expect(dialog).toHaveTextContent("Archive “Lisbon”?");
    expect(setSessionStatus).not.toHaveBeenCalled();
    await userEvent.click(screen.getAllByRole("button", { name: "Archive" }).at(-1)!);
    expect(setSessionStatus).toHaveBeenCalledWith("s1", "archived");
    expect(onDone).toHaveBeenCalled();
    expect(screen.queryByRole("dialog")).toBeNull();
  });

  it("closes the confirm dialog on Escape and returns focus", async () => {
    renderWithApi(
      <SessionActions
        sessionId="s1"
        title="Lisbon"
        chip="Paused"
        archived={false}
        onDone={vi.fn()}
        onBusy={vi.fn()}
      />,
      fakeApi(),
    );
    const archive = screen.getByRole("button", { name: "Archive" });
    await userEvent.click(archive);
    await userEvent.keyboard("{Escape}");
    expect(screen.queryByRole("dialog")).toBeNull();
    expect(archive).toHaveFocus();
  });

  it("resumes a paused sandbox and shows a failure", async () => {
    const resume = vi.fn(async () => Promise.reject(new Error("No sandbox available for resume")));
    const onDone = vi.fn();
    renderWithApi(
      <SessionActions
        sessionId="s1"
        title="Lisbon"
        chip="Paused"
        archived={false}
        onDone={onDone}
        onBusy={vi.fn()}
      />,
      fakeApi({ resume }),
    );
    await userEvent.click(screen.getByRole("button", { name: "Resume" }));
    expect(resume).toHaveBeenCalledWith("s1");
    expect(await screen.findByRole("alert")).toHaveTextContent("No sandbox available for resume");
    expect(onDone).toHaveBeenCalled();
  });
});

describe("StatusChip", () => {
  it("shows a failure's error on hover and to screen readers", () => {
    render(<StatusChip label="Failed" detail="Provisioning failed: clone refused" live />);
    const chip = screen.getByRole("status");
    expect(chip).toHaveAttribute("title", "Provisioning failed: clone refused");
    expect(chip).toHaveTextContent("Failed: Provisioning failed: clone refused");
  });
});
