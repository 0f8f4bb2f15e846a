import { fireEvent, render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { UIMessage } from "../api/client";
import { ApiError } from "../api/http";
import { chat, fakeApi, renderWithApi } from "../test/fakes";
import { ChatPanel } from "./ChatPanel";
import { ChatTabs } from "./ChatTabs";

const text = (id: string, role: UIMessage["role"], body: string): UIMessage => ({
  id,
  role,
  parts: [{ type: "text", text: body }],
});

describe("ChatTabs", () => {
  const handlers = () => ({ onSelect: vi.fn(), onCreate: vi.fn(), onRename: vi.fn(), onDelete: vi.fn() });

  it("cannot delete the only chat", () => {
    render(<ChatTabs chats={[chat()]} activeId="c1" {...handlers()} />);
    expect(screen.getByRole("button", { name: "Delete chat" })).toBeDisabled();
  });

  it("renames the active chat with a trimmed title", async () => {
    const props = handlers();
    render(<ChatTabs chats={[chat(), chat({ id: "c2", title: "Second" })]} activeId="c2" {...props} />);
    expect(screen.getByRole("tab", { name: "Second" })).toHaveAttribute("aria-selected", "true");
    await userEvent.click(screen.getByRole("button", { name: "Rename chat" }));
    const input = screen.getByLabelText("Chat title");
    expect(input).toHaveFocus();
    await userEvent.clear(input);
    await userEvent.type(input, "  Fix the build  {Enter}");
    expect(props.onRename).toHaveBeenCalledWith("c2", "Fix the build");
  });

  it("deletes after confirming, and creates chats", async () => {
    const props = handlers();
    render(<ChatTabs chats={[chat(), chat({ id: "c2", title: "Second" })]} activeId="c2" {...props} />);
    await userEvent.click(screen.getByRole("button", { name: "Delete chat" }));
    expect(screen.getByRole("dialog", { name: "Delete chat" })).toHaveTextContent("Delete “Second”");
    await userEvent.click(screen.getAllByRole("button", { name: "Delete chat" }).at(-1)!);
    expect(props.onDelete).toHaveBeenCalledWith("c2");
    await userEvent.click(screen.getByRole("button", { name: "New chat" }));
    expect(props.onCreate).toHaveBeenCalled();
  });

  it("marks unread chats", () => {
    render(
      <ChatTabs
        chats={[chat(), chat({ id: "c2", title: "Agent", hasUnread: true })]}
        activeId="c1"
        {...handlers()}
      />,
    );
    expect(screen.getByRole("tab", { name: "Agent, unread" })).toBeInTheDocument();
  });
});

describe("ChatPanel", () => {
  it("opens on the newest page and pages up on scroll and on the button", async () => {
    const all = Array.from({ length: 12 }, (_, i) =>
      text(`m${i}`, i % 2 ? "assistant" : "user", `message ${i}`),
    );
    const pages: Record<string, { messages: UIMessage[]; nextCursor: string | null }> = {
      end: { messages: all.slice(8), nextCursor: "before-8" },
      "before-8": { messages: all.slice(4, 8), nextCursor: "before-4" },
      "before-4": { messages: all.slice(0, 4), nextCursor: null },
    };
    const messages = vi.fn(async (_s: string, _c: string, before = "end") => pages[before]!);
    const markRead = vi.fn(async () => ({ success: true as const }));
    const onRead = vi.fn();
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" onRead={onRead} onSent={vi.fn()} />,
      fakeApi({
        messages,
        markRead,
        stream: vi.fn(async () => null),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      }),
    );
    await screen.findByText("message 11");
    expect(messages).toHaveBeenCalledWith("s1", "c1", "end", 50);
    expect(screen.getAllByRole("listitem")).toHaveLength(4);
    expect(markRead).toHaveBeenCalledWith("s1", "c1");
    await waitFor(() => expect(onRead).toHaveBeenCalled());

    const log = screen.getByRole("log", { name: "Messages" });
    log.scrollTop = 0;
    fireEvent.scroll(log); // at the top: the page above loads
    await screen.findByText("message 4");
    expect(messages).toHaveBeenCalledWith("s1", "c1", "before-8");
    expect(screen.getAllByRole("listitem")[0]).toHaveTextContent("message 4");

    await userEvent.click(screen.getByRole("button", { name: "Load earlier messages" }));
    await screen.findByText("message 0");
    expect(screen.getAllByRole("listitem")).toHaveLength(12);
    expect(screen.queryByRole("button", { name: /Load earlier/ })).toBeNull(); // the chat's start
  });

  it("deletes from a user message after confirming, and reloads", async () => {
    let stored = [
      text("u0", "user", "first"),
      text("a0", "assistant", "answer"),
      text("u1", "user", "second"),
    ];
    const deleteFrom = vi.fn(async () => {
      stored = stored.slice(0, 2);
      return { success: true as const, deletedMessageIds: ["u1"] };
    });
    const onSent = vi.fn();
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={onSent} />,
      fakeApi({
        messages: vi.fn(async () => ({ messages: stored, nextCursor: null })),
        markRead: vi.fn(async () => ({ success: true as const })),
        stream: vi.fn(async () => null),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
        deleteFrom,
      }),
    );
    await screen.findByText("second");
    const buttons = screen.getAllByRole("button", { name: "Delete from here" });
    expect(buttons).toHaveLength(2); // user messages only
    await userEvent.click(buttons[1]!);
    const dialog = screen.getByRole("dialog", { name: "Delete messages" });
    await userEvent.click(within(dialog).getByRole("button", { name: "Delete from here" }));
    expect(deleteFrom).toHaveBeenCalledWith("s1", "c1", "u1");
    await waitFor(() => expect(screen.queryByText("second")).toBeNull());
    expect(onSent).toHaveBeenCalled();
  });

  it("shows why a deletion was refused", async () => {
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />,
      fakeApi({
        messages: vi.fn(async () => ({ messages: [text("u0", "user", "first")], nextCursor: null })),
        markRead: vi.fn(async () => ({ success: true as const })),
        stream: vi.fn(async () => null),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
        deleteFrom: vi.fn(async () =>
          Promise.reject(
            new ApiError(409, "turn_in_progress", "Cannot delete messages while a response is streaming"),
          ),
        ),
      }),
    );
    await userEvent.click(await screen.findByRole("button", { name: "Delete from here" }));
    await userEvent.click(
      within(screen.getByRole("dialog")).getByRole("button", { name: "Delete from here" }),
    );
    expect(await screen.findByRole("alert")).toHaveTextContent("while a response is streaming");
    expect(screen.getByText("first")).toBeInTheDocument();
  });

  it("forks through an assistant message and hands the new chat over", async () => {
    const fork = chat({ id: "c2", title: "Fork of New chat" });
    const forkChat = vi.fn(async () => ({ chat: fork }));
    const onForked = vi.fn();
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} onForked={onForked} />,
      fakeApi({
        messages: vi.fn(async () => ({
          messages: [text("u0", "user", "first"), text("a0", "assistant", "answer")],
          nextCursor: null,
        })),
        markRead: vi.fn(async () => ({ success: true as const })),
        stream: vi.fn(async () => null),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
        forkChat,
      }),
    );
    const forks = await screen.findAllByRole("button", { name: "Fork" });
    expect(forks).toHaveLength(1); // assistant messages only
    await userEvent.click(forks[0]!);
    expect(forkChat).toHaveBeenCalledWith("s1", "c1", "a0");
    await waitFor(() => expect(onForked).toHaveBeenCalledWith(fork));
  });

  it("says it waits for an answer from the stored message itself, as when opened again", async () => {
    // the notice must not depend on having seen the turn end (a remount, a reload, a late page)
    const waiting: UIMessage = {
      id: "a0",
      role: "assistant",
      parts: [
        {
          type: "tool-bash",
          toolCallId: "call-1",
          state: "approval-requested",
          input: { command: "rm -rf build" },
          approval: { id: "ap-1" },
        },
      ],
    } as unknown as UIMessage;
    renderWithApi(
      <ChatPanel sessionId="s1" chatId="c1" activeRunId={null} onRead={vi.fn()} onSent={vi.fn()} />,
      fakeApi({
        messages: vi.fn(async () => ({
          messages: [text("u0", "user", "clear it"), waiting],
          nextCursor: null,
        })),
        markRead: vi.fn(async () => ({ success: true as const })),
        stream: vi.fn(async () => null),
        models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      }),
    );
    expect(await screen.findByText("Waiting for your answer.")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Approve" })).toBeInTheDocument();
  });

  it("posts a user message on Enter and shows it", async () => {
    const startTurn = vi.fn(async () => ({ runId: "r1", status: "running" as const }));
    const onSent = vi.fn();
    const api = fakeApi({
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      stream: vi.fn(async () => null),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      startTurn,
    });
    renderWithApi(<ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={onSent} />, api);
    await screen.findByText("No messages yet.");
    await userEvent.type(screen.getByRole("textbox", { name: "Message" }), "Run the tests{Enter}");
    expect(startTurn).toHaveBeenCalledWith("s1", "c1", {
      id: expect.any(String),
      role: "user",
      parts: [{ type: "text", text: "Run the tests" }],
    });
    expect(await screen.findByText("Run the tests")).toBeInTheDocument();
    expect(screen.getByRole("textbox", { name: "Message" })).toHaveValue("");
    expect(onSent).toHaveBeenCalled();
  });

  it("keeps the text when sending fails", async () => {
    const api = fakeApi({
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      markRead: vi.fn(async () => ({ success: true as const })),
      stream: vi.fn(async () => null),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      startTurn: vi.fn(async () => Promise.reject(new Error("Message too large"))),
    });
    renderWithApi(<ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />, api);
    await userEvent.type(screen.getByRole("textbox", { name: "Message" }), "hello");
    await userEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Not sent: Message too large");
    expect(screen.getByRole("textbox", { name: "Message" })).toHaveValue("hello");
  });
});
