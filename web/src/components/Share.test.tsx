import { render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { SharedApi } from "../api/client";
import { ApiError } from "../api/http";
import { sharedId } from "../router";
import { fakeApi, renderWithApi } from "../test/fakes";
import { SharedChat } from "./SharedChat";
import { ShareButton } from "./ShareButton";

const sharePreview = vi.fn(async () => ({
  title: "T",
  messages: [],
  markdown: "# T\n\nkey=[redacted secret]\n",
  redactions: 2,
}));

describe("ShareButton", () => {
  it("shows a chat shared before (after a reload) with its link and Stop sharing", async () => {
    const user = userEvent.setup();
    const getShare = vi.fn(async () => ({ shareId: "Ab_12-cd" }));
    const unshare = vi.fn(async () => ({ success: true as const }));
    renderWithApi(<ShareButton sessionId="s1" chatId="c1" />, fakeApi({ getShare, unshare }));
    expect(await screen.findByLabelText("Share link")).toHaveValue(
      `${window.location.origin}/shared/Ab_12-cd`,
    );
    expect(getShare).toHaveBeenCalledWith("s1", "c1");
    await user.click(screen.getByRole("button", { name: "Stop sharing" }));
    expect(unshare).toHaveBeenCalledWith("s1", "c1");
    expect(await screen.findByRole("button", { name: "Share" })).toBeInTheDocument();
    expect(screen.queryByLabelText("Share link")).toBeNull();
  });

  it("offers Share for a chat not shared", async () => {
    const getShare = vi.fn(async () => ({ shareId: null }));
    renderWithApi(<ShareButton sessionId="s1" chatId="c1" />, fakeApi({ getShare }));
    await waitFor(() => expect(getShare).toHaveBeenCalled());
    expect(screen.getByRole("button", { name: "Share" })).toBeInTheDocument();
    expect(screen.queryByLabelText("Share link")).toBeNull();
  });

  it("shows the preview and shares nothing when cancelled", async () => {
    const user = userEvent.setup();
    const share = vi.fn(async () => ({ shareId: "x" }));
    renderWithApi(<ShareButton sessionId="s1" chatId="c1" />, fakeApi({ share, sharePreview }));
    await user.click(screen.getByRole("button", { name: "Share" }));
    await user.click(await screen.findByRole("button", { name: "Cancel" }));
    expect(screen.queryByLabelText("Shared transcript")).toBeNull();
    expect(share).not.toHaveBeenCalled();
    expect(sharePreview).toHaveBeenCalledWith("s1", "c1");
  });

  it("creates the link, copies it and revokes it", async () => {
    const user = userEvent.setup();
    const writeText = vi.spyOn(navigator.clipboard, "writeText").mockResolvedValue(undefined);
    const share = vi.fn(async () => ({ shareId: "Ab_12-cd" }));
    const unshare = vi.fn(async () => ({ success: true as const }));
    renderWithApi(<ShareButton sessionId="s1" chatId="c1" />, fakeApi({ share, unshare, sharePreview }));

    await user.click(screen.getByRole("button", { name: "Share" }));
    expect(await screen.findByLabelText("Shared transcript")).toHaveTextContent("key=[redacted secret]");
    expect(screen.getByText(/2 secrets were redacted/)).toBeInTheDocument();
    expect(share).not.toHaveBeenCalled(); // nothing is shared before the owner says so
    await user.click(screen.getByRole("button", { name: "Create link" }));
    const link = await screen.findByLabelText("Share link");
    expect(share).toHaveBeenCalledWith("s1", "c1");
    expect(link).toHaveValue(`${window.location.origin}/shared/Ab_12-cd`);
    await user.click(screen.getByRole("button", { name: "Copy link" }));
    expect(writeText).toHaveBeenCalledWith(`${window.location.origin}/shared/Ab_12-cd`);
    expect(await screen.findByRole("status")).toHaveTextContent("Link copied");

    await user.click(screen.getByRole("button", { name: "Stop sharing" }));
    expect(unshare).toHaveBeenCalledWith("s1", "c1");
    expect(await screen.findByRole("button", { name: "Share" })).toBeInTheDocument();
    expect(screen.queryByLabelText("Share link")).toBeNull();
  });

  it("says why sharing failed", async () => {
    const refused = new ApiError(404, "not_found", "Chat not found");
    renderWithApi(
      <ShareButton sessionId="s1" chatId="c1" />,
      fakeApi({ sharePreview: vi.fn(async () => Promise.reject(refused)) }),
    );
    await userEvent.click(screen.getByRole("button", { name: "Share" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Chat not found");
  });
});

describe("SharedChat", () => {
  const transcript = {
    title: "Fix the login bug",
    messages: [
      { id: "u0", role: "user", parts: [{ type: "text", text: "Why does login fail?" }] },
      { id: "a0", role: "assistant", parts: [{ type: "text", text: "The cookie expired." }] },
    ],
  };

  it("shows the transcript read-only", async () => {
    const api: SharedApi = {
      transcript: vi.fn(async () => transcript),
      status: vi.fn(async () => ({ isStreaming: false })),
    };
    render(<SharedChat shareId="abc" api={api} />);
    expect(await screen.findByRole("heading", { name: "Fix the login bug" })).toBeInTheDocument();
    expect(screen.getByText("Why does login fail?")).toBeInTheDocument();
    expect(await screen.findByText("The cookie expired.")).toBeInTheDocument();
    expect(api.transcript).toHaveBeenCalledWith("abc");
    await waitFor(() => expect(api.status).toHaveBeenCalledWith("abc"));
    expect(screen.queryByRole("textbox")).toBeNull(); // nothing to send from here
    expect(screen.queryByRole("button")).toBeNull();
  });

  it("refreshes while the agent works", async () => {
    const api: SharedApi = {
      transcript: vi.fn(async () => transcript),
      status: vi.fn(async () => ({ isStreaming: true })),
    };
    render(<SharedChat shareId="abc" api={api} />);
    expect(await screen.findByText(/The agent is working/)).toBeInTheDocument();
    await waitFor(() => expect(api.transcript).toHaveBeenCalledTimes(2));
  });

  it("says when the link was revoked", async () => {
    const api: SharedApi = {
      transcript: vi.fn(async () => Promise.reject(new ApiError(404, "not_found", "Not found"))),
      status: vi.fn(async () => Promise.reject(new ApiError(404, "not_found", "Not found"))),
    };
    render(<SharedChat shareId="gone" api={api} />);
    expect(await screen.findByRole("alert")).toHaveTextContent("does not exist or was revoked");
  });
});

describe("sharedId", () => {
  it("reads the share id of a /shared page only", () => {
    expect(sharedId("/shared/Ab_12-cd")).toBe("Ab_12-cd");
    expect(sharedId("/shared/a%20b/")).toBe("a b");
    expect(sharedId("/sessions/s1")).toBeNull();
    expect(sharedId("/shared/")).toBeNull();
    expect(sharedId("/shared/a/b")).toBeNull();
  });
});
