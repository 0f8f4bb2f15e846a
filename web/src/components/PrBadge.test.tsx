import { render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { useSessionList } from "../hooks/useSessionList";
import { chat, fakeApi, fullSession, renderWithApi, sandboxStatus, summary } from "../test/fakes";
import { PrBadge, prLabel } from "./PrBadge";
import { SessionView } from "./SessionView";
import { Sidebar } from "./Sidebar";

function SidebarHarness() {
  const active = useSessionList("active", true);
  return <Sidebar active={active} selectedId={null} onNewSession={vi.fn()} />;
}

describe("PrBadge", () => {
  it("says the number and the state, and nothing without a pull request", () => {
    expect(prLabel(12, "merged")).toBe("PR #12 merged");
    expect(prLabel(null, null)).toBeNull();
    const { container } = render(<PrBadge number={null} status={null} />);
    expect(container).toBeEmptyDOMElement();
    render(<PrBadge number={7} status="closed" />);
    expect(screen.getByText("PR #7")).toHaveClass("pr-closed");
    expect(screen.getByText("PR #7")).toHaveAttribute("title", "PR #7 closed");
  });

  it("shows in the sidebar, in each session's name", async () => {
    const listSessions = vi.fn(async () => ({
      sessions: [
        summary({ id: "s1", title: "Lisbon", prNumber: 12, prStatus: "open" }),
        summary({ id: "s2", title: "Porto", prNumber: 3, prStatus: "merged" }),
        summary({ id: "s3", title: "Faro" }),
      ],
      nextCursor: null,
      archivedCount: 0,
      hasMore: false,
    }));
    renderWithApi(<SidebarHarness />, fakeApi({ listSessions }));
    const lisbon = await screen.findByRole("link", { name: /Lisbon/ });
    expect(lisbon).toHaveAccessibleName(
      expect.stringMatching(/^Lisbon,\s*acme\/app · as\/1a2b3c4d PR #12\s*open,\s*Active$/),
    );
    expect(within(lisbon).getByText("PR #12")).toHaveClass("pr-open");
    expect(within(screen.getByRole("link", { name: /Porto/ })).getByText("PR #3")).toHaveClass("pr-merged");
    expect(within(screen.getByRole("link", { name: /Faro/ })).queryByText(/PR #/)).toBeNull();
  });

  it("shows in the session's header", async () => {
    const session = fullSession({ prNumber: 41, prStatus: "merged" });
    const api = fakeApi({
      getSession: vi.fn(async () => ({ session })),
      sandboxStatus: vi.fn(async () => sandboxStatus()),
      listChats: vi.fn(async () => ({ chats: [chat()], defaultModelId: "m" })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      files: vi.fn(async () => ({ entries: [] })),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      stream: vi.fn(async () => null),
    });
    renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, api);
    const header = (await screen.findByRole("heading", { level: 1 })).closest("header")!;
    expect(within(header).getByText("PR #41")).toHaveAttribute("title", "PR #41 merged");
  });
});
