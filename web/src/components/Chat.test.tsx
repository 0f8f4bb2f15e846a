import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { UIMessage } from "../api/client";
import { WINDOW } from "../hooks/useMessages";
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
  it("follows the cursor to the newest messages, shows the latest ones and reveals earlier ones", async () => {
    const all = Array.from({ length: WINDOW + 5 }, (_, i) =>
      text(`m${i}`, i % 2 ? "assistant" : "user", `message ${i}`),
    );
    const messages = vi.fn(async (_s: string, _c: string, cursor?: string | null) =>
      cursor
        ? { messages: all.slice(30), nextCursor: null }
        : { messages: all.slice(0, 30), nextCursor: "p2" },
    );
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
    await screen.findByText(`message ${WINDOW + 4}`);
    expect(screen.queryByText("message 4")).toBeNull();
    const items = screen.getAllByRole("listitem");
    expect(items).toHaveLength(WINDOW);
    expect(items[0]).toHaveTextContent("message 5");
    expect(markRead).toHaveBeenCalledWith("s1", "c1");
    await waitFor(() => expect(onRead).toHaveBeenCalled());
    await userEvent.click(screen.getByRole("button", { name: "Show earlier messages (5)" }));
    expect(screen.getAllByRole("listitem")[0]).toHaveTextContent("message 0");
    expect(screen.queryByRole("button", { name: /Show earlier/ })).toBeNull();
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
