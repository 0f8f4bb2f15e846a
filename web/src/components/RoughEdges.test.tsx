// The rough edges a new user hit (issue 14), one test each.
import { act, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Api } from "../api/client";
import { failureInWords } from "../lifecycle/status";
import { chat, fakeApi, fullSession, renderWithApi, sandboxStatus } from "../test/fakes";
import { ChatTabs } from "./ChatTabs";
import { FileBrowser, NO_FILES } from "./FileBrowser";
import { NewSessionDialog, repositoryFields } from "./NewSessionDialog";
import { SessionView } from "./SessionView";
import { Workspace } from "./Workspace";

const session = fullSession;

/** A session view over fakes: the session, its status (a function: it may change), one chat. */
function view(status: () => ReturnType<typeof sandboxStatus>, api: Partial<Api> = {}, data = session()) {
  const full = fakeApi({
    getSession: vi.fn(async () => ({ session: data })),
    sandboxStatus: vi.fn(async () => status()),
    listChats: vi.fn(async () => ({ chats: [chat()], defaultModelId: "m" })),
    messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
    markRead: vi.fn(async () => ({ success: true as const })),
    files: vi.fn(async () => ({ entries: [] })),
    models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
    stream: vi.fn(async () => null),
    ...api,
  });
  renderWithApi(<SessionView sessionId="s1" chatId={null} onSessionsChanged={vi.fn()} />, full);
  return full;
}

/** The session header's status chip. */
const chipLabel = () => document.querySelector(".session-status .chip")?.getAttribute("data-state");

const paused = () =>
  sandboxStatus({ state: "hibernated", hibernateAfter: null }, { status: "paused", hasSnapshot: true });

afterEach(() => {
  vi.unstubAllGlobals();
  window.history.replaceState(null, "", "/");
});

describe("rough edges", () => {
  it("a message to a paused session is sent (the API resumes the sandbox)", async () => {
    const startTurn = vi.fn(async () => ({ runId: "r1", status: "running" as const }));
    view(paused, { startTurn, postMessage: vi.fn() });
    await waitFor(() => expect(chipLabel()).toBe("Paused"));
    const box = await screen.findByRole("textbox", { name: "Message" });
    expect(box).toBeEnabled();
    await userEvent.type(box, "Carry on{Enter}");
    await waitFor(() => expect(startTurn).toHaveBeenCalled());
    expect(startTurn.mock.calls[0]).toEqual(["s1", "c1", expect.objectContaining({ role: "user" })]);
  });

  it("an archived session's composer is disabled with “Unarchive to continue”", async () => {
    view(
      () => sandboxStatus({ state: "archived", hibernateAfter: null }, { status: "no_sandbox" }),
      {},
      session({ status: "archived" }),
    );
    const box = await screen.findByRole("textbox", { name: "Message" });
    expect(box).toBeDisabled();
    expect(box).toHaveAccessibleDescription("Unarchive to continue.");
    expect(screen.getByRole("button", { name: "Send" })).toBeDisabled();
  });

  it("the new-session dialog needs a repository unless “No repository” is ticked", async () => {
    const createSession = vi.fn(async () => ({ session: { id: "s9" }, chat: chat({ id: "c9" }) }) as never);
    renderWithApi(
      <NewSessionDialog local={false} onClose={vi.fn()} onCreated={vi.fn()} />,
      fakeApi({ createSession, preferences: vi.fn(() => Promise.reject(new Error("offline"))) }),
    );
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    const field = screen.getByLabelText("Repository");
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "Enter a repository, or tick “No repository”.",
    );
    expect(field).toHaveAttribute("aria-invalid", "true");
    expect(createSession).not.toHaveBeenCalled();
    await userEvent.click(screen.getByRole("checkbox", { name: /No repository/ }));
    expect(field).toBeDisabled();
    expect(screen.queryByRole("alert")).toBeNull();
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    expect(createSession).toHaveBeenCalledWith({
      isNewBranch: true,
      autoCommitPush: false,
      autoCreatePr: false,
    });
  });

  it("the new-session hint says what the server accepts, and owner/repo is sent as owner and name", async () => {
    renderWithApi(
      <NewSessionDialog local onClose={vi.fn()} onCreated={vi.fn()} />,
      fakeApi({ preferences: vi.fn(() => Promise.reject(new Error("offline"))) }),
    );
    const field = screen.getByLabelText("Repository");
    expect(field).toHaveAccessibleDescription(
      "owner/repo, or an https:// URL of a repository on an allowed host (github.com by default), or the absolute path of a git repository on this machine.",
    );
    expect(repositoryFields("acme/app")).toEqual({ repoOwner: "acme", repoName: "app" });
    expect(repositoryFields("acme/app.git")).toEqual({ repoOwner: "acme", repoName: "app" });
    expect(repositoryFields("https://github.com/acme/app")).toEqual({
      repoUrl: "https://github.com/acme/app",
    });
    expect(repositoryFields("/srv/git/app.git")).toEqual({ repoUrl: "/srv/git/app.git" });
  });

  it("a failed session says why inline, in words, and Retry reports what it did", async () => {
    let state: "failed" | "provisioning" = "failed";
    const retryProvisioning = vi.fn(async () => {
      state = "provisioning";
      return { status: "provisioning" } as never;
    });
    view(
      () =>
        sandboxStatus(
          { state, hibernateAfter: null, error: "Provisioning failed: SandboxError: git clone exited 128" },
          { status: "stopped" } as never,
        ),
      { retryProvisioning },
    );
    const alert = await screen.findByRole("alert");
    expect(alert).toHaveTextContent("The sandbox could not be set up: git clone exited 128.");
    expect(alert).not.toHaveTextContent("SandboxError");
    await userEvent.click(screen.getByRole("button", { name: "Retry sandbox" }));
    expect(retryProvisioning).toHaveBeenCalledWith("s1");
    expect(await screen.findByText("Retry started: the sandbox is being set up again.")).toBeInTheDocument();
    expect(screen.queryByRole("alert")).toBeNull();
    expect(failureInWords("States.Timeout")).toBe("The sandbox failed.");
    expect(failureInWords("Sandbox lost (stopped); resume restores the snapshot")).toBe(
      "Sandbox lost (stopped); resume restores the snapshot.",
    );
  });

  it("Pause says Hibernating at once with its button disabled", async () => {
    let release: () => void = () => undefined;
    const pause = vi.fn(() => new Promise<never>((resolve) => (release = () => resolve({} as never))));
    view(() => sandboxStatus(), { pause });
    await userEvent.click(await screen.findByRole("button", { name: "Pause" }));
    expect(screen.getByRole("button", { name: "Hibernating…" })).toBeDisabled();
    expect(chipLabel()).toBe("Hibernating");
    await act(async () => release());
  });

  it("unarchiving shows Restoring while the sandbox comes back from the archive, not Provisioning", async () => {
    let archived = true;
    const setSessionStatus = vi.fn(async () => {
      archived = false;
      return { session: session() } as never;
    });
    const api = view(
      () =>
        archived
          ? sandboxStatus({ state: "archived", hibernateAfter: null }, { status: "no_sandbox" })
          : sandboxStatus({ state: "provisioning", hibernateAfter: null }, { status: "stopped" } as never),
      { setSessionStatus },
      session({ status: "archived" }),
    );
    vi.mocked(api.getSession).mockImplementation(async () => ({
      session: session({ status: archived ? "archived" : "running" }),
    }));
    await userEvent.click(await screen.findByRole("button", { name: "Unarchive" }));
    expect(setSessionStatus).toHaveBeenCalledWith("s1", "running");
    await waitFor(() => expect(screen.getByRole("button", { name: "Archive" })).toBeInTheDocument());
    await waitFor(() => expect(api.sandboxStatus).toHaveBeenCalledTimes(2));
    expect(chipLabel()).toBe("Restoring");
  });

  it("the file panel says what each state is", () => {
    for (const [chip, text] of Object.entries(NO_FILES)) {
      const { unmount } = renderWithApi(
        <FileBrowser sessionId="s1" chip={chip as keyof typeof NO_FILES} />,
        fakeApi(),
      );
      expect(screen.getByText(text)).toBeInTheDocument();
      unmount();
    }
    expect(NO_FILES.Provisioning).toMatch(/being set up/);
    expect(NO_FILES.Restoring).toMatch(/being restored/);
    expect(NO_FILES.Failed).toMatch(/failed/);
    expect(NO_FILES.Archived).toMatch(/archived/);
  });

  it("the file tree hides .git/", async () => {
    const files = vi.fn(async () => ({
      entries: [
        { path: ".git", type: "dir" as const, size: 0 },
        { path: ".github", type: "dir" as const, size: 0 },
        { path: "README.md", type: "file" as const, size: 3 },
      ],
    }));
    renderWithApi(<FileBrowser sessionId="s1" chip="Active" />, fakeApi({ files }));
    expect(await screen.findByRole("button", { name: "README.md" })).toBeInTheDocument();
    expect(screen.getByRole("button", { name: ".github/" })).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: ".git/" })).toBeNull();
  });

  it("a chat tab's title is cut short with the whole title on hover", () => {
    const title = "Refactor the provisioning workflow so that restores and fresh clones share one path";
    render(
      <ChatTabs
        chats={[chat({ title })]}
        activeId="c1"
        onSelect={vi.fn()}
        onCreate={vi.fn()}
        onRename={vi.fn()}
        onDelete={vi.fn()}
      />,
    );
    const tab = screen.getByRole("tab", { name: title });
    expect(tab).toHaveAttribute("title", title);
    expect(within(tab).getByText(title)).toHaveClass("tab-title");
  });

  it("the header's product name links home, and the empty home page has New session", async () => {
    window.history.replaceState(null, "", "/sessions/s1");
    const listSessions = vi.fn(async () => ({
      sessions: [],
      nextCursor: null,
      archivedCount: 0,
      hasMore: false,
    }));
    renderWithApi(
      <Workspace user="ana" local onSignOut={vi.fn()} />,
      fakeApi({ listSessions, getSession: vi.fn(() => new Promise<never>(() => undefined)) }),
    );
    const home = screen.getByRole("link", { name: "Open Agents" });
    expect(home).toHaveAttribute("href", "/");
    await userEvent.click(home);
    expect(window.location.pathname).toBe("/");
    const main = screen.getByRole("main");
    await userEvent.click(within(main).getByRole("button", { name: "New session" }));
    expect(screen.getByRole("dialog", { name: "New session" })).toBeInTheDocument();
  });

  it("on a phone the sandbox panel is a tab beside the chat, not below it", async () => {
    vi.stubGlobal(
      "matchMedia",
      vi.fn((query: string) => ({
        matches: query === "(max-width: 799px)",
        addEventListener: vi.fn(),
        removeEventListener: vi.fn(),
      })),
    );
    view(() => sandboxStatus());
    const views = await screen.findByRole("tablist", { name: "Session views" });
    const chatTab = within(views).getByRole("tab", { name: "Chat" });
    expect(chatTab).toHaveAttribute("aria-selected", "true");
    const panel = document.getElementById(chatTab.getAttribute("aria-controls")!)!;
    expect(panel).toHaveAttribute("data-pane", "chat");
    await userEvent.click(within(views).getByRole("tab", { name: "Sandbox" }));
    expect(panel).toHaveAttribute("data-pane", "sandbox");
    expect(panel).toHaveAttribute("aria-labelledby", within(views).getByRole("tab", { name: "Sandbox" }).id);
  });
});
