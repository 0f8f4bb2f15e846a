import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { beforeEach, describe, expect, it, vi } from "vitest";
import { parseRoute, usePathname } from "../router";
import { chat, fakeApi, renderWithApi } from "../test/fakes";
import { ChatArea } from "./ChatArea";

function Routed() {
  const { chatId } = parseRoute(usePathname());
  return <ChatArea sessionId="s1" chatId={chatId} latestChatId="c1" onRead={vi.fn()} onSent={vi.fn()} />;
}

function api(chats = [chat()]) {
  return fakeApi({
    listChats: vi.fn(async () => ({ chats, defaultModelId: "m" })),
    messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
    markRead: vi.fn(async () => ({ success: true as const })),
  });
}

beforeEach(() => window.history.replaceState(null, "", "/sessions/s1"));

describe("ChatArea", () => {
  it("opens the latest chat when the URL names none", async () => {
    renderWithApi(<Routed />, api([chat(), chat({ id: "c2", title: "Other" })]));
    expect(await screen.findByRole("tab", { name: "New chat" })).toHaveAttribute("aria-selected", "true");
    expect(screen.getByRole("tabpanel")).toHaveAttribute("aria-labelledby", "chat-tab-c1");
  });

  it("creates a chat with a client id and switches to it", async () => {
    const chats = [chat()];
    const fake = api(chats);
    fake.createChat = vi.fn(async (_s: string, id: string) => {
      chats.push(chat({ id, title: "New chat 2" }));
      return { chat: chats[1]! };
    });
    renderWithApi(<Routed />, fake);
    await userEvent.click(await screen.findByRole("button", { name: "New chat" }));
    const [, id] = vi.mocked(fake.createChat).mock.calls[0]!;
    expect(id).toMatch(/^[\w-]{1,64}$/);
    expect(window.location.pathname).toBe(`/sessions/s1/chats/${id}`);
    await waitFor(() =>
      expect(screen.getByRole("tab", { name: "New chat 2" })).toHaveAttribute("aria-selected", "true"),
    );
  });

  it("shows why a delete was refused", async () => {
    const fake = api([chat(), chat({ id: "c2", title: "Other" })]);
    fake.deleteChat = vi.fn(async () =>
      Promise.reject(new Error("Cannot delete the only chat in a session")),
    );
    renderWithApi(<Routed />, fake);
    await userEvent.click(await screen.findByRole("button", { name: "Delete chat" }));
    await userEvent.click(screen.getAllByRole("button", { name: "Delete chat" }).at(-1)!);
    expect(await screen.findByRole("alert")).toHaveTextContent("Cannot delete the only chat in a session");
  });
});
