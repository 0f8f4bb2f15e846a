import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, SessionList } from "../api/client";
import { useSessionList } from "../hooks/useSessionList";
import { axeViolations } from "../test/axe";
import { fakeApi, renderWithApi, summary } from "../test/fakes";
import { Sidebar } from "./Sidebar";

function page(
  sessions: SessionList["sessions"],
  nextCursor: string | null,
  archivedCount: number,
): SessionList {
  return { sessions, nextCursor, archivedCount, hasMore: nextCursor !== null };
}

function Harness() {
  const active = useSessionList("active", true);
  return <Sidebar active={active} selectedId="s2" onNewSession={vi.fn()} />;
}

function setup(listSessions: Api["listSessions"]) {
  const api = fakeApi({ listSessions });
  renderWithApi(<Harness />, api);
  return api;
}

describe("Sidebar", () => {
  it("lists active sessions newest first with unread dots, badges and the archived count", async () => {
    setup(
      vi.fn(async () =>
        page(
          [
            summary({ id: "s2", title: "Porto", hasUnread: true, lifecycleState: "hibernated" }),
            summary({ id: "s1", title: "Lisbon", lifecycleState: "provisioning" }),
          ],
          null,
          3,
        ),
      ),
    );
    const links = await screen.findAllByRole("link");
    expect(links.map((link) => link.textContent)).toEqual([
      expect.stringContaining("Porto"),
      expect.stringContaining("Lisbon"),
    ]);
    // named by their visible text, the unread dot in hidden words (no aria-label to mismatch it)
    expect(links[0]).toHaveAccessibleName(
      expect.stringMatching(/^Porto, unread,\s*acme\/app · as\/1a2b3c4d,\s*Paused$/),
    );
    expect(links[1]).toHaveAccessibleName(
      expect.stringMatching(/^Lisbon,\s*acme\/app · as\/1a2b3c4d,\s*Provisioning$/),
    );
    expect(links[0]).not.toHaveAttribute("aria-label");
    expect(await axeViolations()).toEqual([]);
    expect(within(links[0]!).getByText("Paused")).toBeInTheDocument();
    expect(within(links[1]!).getByText("Provisioning")).toBeInTheDocument();
    expect(links[0]).toHaveAttribute("aria-current", "page");
    expect(links[0]).toHaveAttribute("href", "/sessions/s2/chats/c1");
    expect(screen.getByRole("tab", { name: /Archived/ })).toHaveTextContent("Archived 3");
  });

  it("pages the archived list 50 at a time with the cursor", async () => {
    const listSessions = vi.fn(async (status: string, cursor?: string | null) => {
      if (status === "active") return page([], null, 51);
      return cursor === "next"
        ? page([summary({ id: "a51", title: "Oslo", status: "archived" })], null, 51)
        : page([summary({ id: "a1", title: "Rome", status: "archived" })], "next", 51);
    });
    setup(listSessions);
    await screen.findByText("No active sessions yet.");
    await userEvent.click(screen.getByRole("tab", { name: /Archived/ }));
    await screen.findByRole("link", { name: /Rome/ });
    expect(listSessions).toHaveBeenCalledWith("archived", null, 50);
    await userEvent.click(screen.getByRole("button", { name: "Load more" }));
    await screen.findByRole("link", { name: /Oslo/ });
    expect(listSessions).toHaveBeenLastCalledWith("archived", "next", 50);
    expect(screen.getAllByRole("link")).toHaveLength(2);
    await waitFor(() => expect(screen.queryByRole("button", { name: "Load more" })).toBeNull());
  });

  it("moves between the list tabs with the arrow keys", async () => {
    setup(vi.fn(async () => page([], null, 0)));
    const activeTab = screen.getByRole("tab", { name: "Active" });
    activeTab.focus();
    await userEvent.keyboard("{ArrowRight}");
    const archivedTab = screen.getByRole("tab", { name: /Archived/ });
    expect(archivedTab).toHaveFocus();
    expect(archivedTab).toHaveAttribute("aria-selected", "true");
    expect(screen.getByRole("tabpanel")).toHaveAttribute("aria-labelledby", archivedTab.id);
  });
});
