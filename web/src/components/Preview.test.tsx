import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/http";
import { fakeApi, renderWithApi } from "../test/fakes";
import { Preview, embeddable } from "./Preview";

const listening = {
  ports: [{ port: 8765, address: "127.0.0.1", pid: 7, command: "python3 -m http.server", previewHost: "h" }],
};
const URL = "http://8765-abc.localhost:8000/__preview/auth?token=t&path=%2F";

describe("Preview", () => {
  it("embeds a preview only on a page of its own site", () => {
    expect(embeddable(URL, "localhost")).toBe(true);
    expect(embeddable(URL, "127.0.0.1")).toBe(false);
    expect(embeddable(URL, "example.com")).toBe(false);
  });

  it("lists the ports and shows one through its preview link", async () => {
    const user = userEvent.setup();
    const createPreview = vi.fn(async () => ({
      url: URL,
      expiresAt: "2026-12-03T12:00:00Z",
      visibility: "private" as const,
    }));
    renderWithApi(
      <Preview sessionId="s1" running />,
      fakeApi({ ports: vi.fn(async () => listening), createPreview }),
    );
    expect(await screen.findByText("python3 -m http.server")).toBeInTheDocument();
    await user.click(screen.getByRole("button", { name: "Preview 8765" }));
    expect(createPreview).toHaveBeenCalledWith("s1", 8765);
    expect(await screen.findByTitle("Preview")).toHaveAttribute("src", URL);
  });

  it("says why a preview failed, and asks to resume a stopped sandbox", async () => {
    const user = userEvent.setup();
    const refused = new ApiError(404, "port_not_listening", "Nothing listens on port 8765");
    renderWithApi(
      <Preview sessionId="s1" running />,
      fakeApi({
        ports: vi.fn(async () => listening),
        createPreview: vi.fn(async () => Promise.reject(refused)),
      }),
    );
    await user.click(await screen.findByRole("button", { name: "Preview 8765" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Nothing listens on port 8765");
    expect(screen.queryByTitle("Preview")).toBeNull();
  });

  it("makes a port public on purpose, shows its link, and revokes it", async () => {
    const user = userEvent.setup();
    const PUBLIC = "http://8765-abc.localhost:8000/__preview/auth?token=pub.s3cret&path=%2F";
    const made = { port: 8765, url: PUBLIC, createdAt: "2026-12-03T12:00:00Z" };
    const publicPreviews = vi
      .fn()
      .mockResolvedValueOnce({ previews: [] })
      .mockResolvedValueOnce({ previews: [made] })
      .mockResolvedValueOnce({ previews: [] });
    const makePreviewPublic = vi.fn(async () => ({
      url: PUBLIC,
      expiresAt: null,
      visibility: "public" as const,
    }));
    const revokePreview = vi.fn(async () => undefined as never);
    renderWithApi(
      <Preview sessionId="s1" running />,
      fakeApi({ ports: vi.fn(async () => listening), publicPreviews, makePreviewPublic, revokePreview }),
    );
    await user.click(await screen.findByRole("button", { name: "Make 8765 public" }));
    expect(makePreviewPublic).toHaveBeenCalledWith("s1", 8765);
    expect(await screen.findByLabelText("Public link to 8765")).toHaveValue(PUBLIC);
    await user.click(screen.getByRole("button", { name: "Revoke public link to 8765" }));
    expect(revokePreview).toHaveBeenCalledWith("s1", 8765);
    expect(await screen.findByRole("button", { name: "Make 8765 public" })).toBeInTheDocument();
    expect(screen.queryByLabelText("Public link to 8765")).toBeNull();
  });

  it("starts the dev server and shows it, then stops it", async () => {
    const user = userEvent.setup();
    const startDevServer = vi.fn(async () => ({
      port: 5173,
      command: "npm run dev",
      logPath: "/tmp/openagents/dev-server.log",
      running: true,
      framework: "vite",
      url: URL,
      status: "running" as const,
    }));
    const stopDevServer = vi.fn(async () => ({
      port: 5173,
      command: "npm run dev",
      logPath: "/tmp/openagents/dev-server.log",
      running: false,
      status: "stopped" as const,
    }));
    renderWithApi(
      <Preview sessionId="s1" running />,
      fakeApi({ ports: vi.fn(async () => ({ ports: [] })), startDevServer, stopDevServer }),
    );
    await user.click(await screen.findByRole("button", { name: "Start dev server" }));
    expect(startDevServer).toHaveBeenCalledWith("s1");
    expect(await screen.findByTitle("Preview")).toHaveAttribute("src", URL);
    await user.click(screen.getByRole("button", { name: "Stop dev server" }));
    expect(stopDevServer).toHaveBeenCalledWith("s1");
    expect(screen.queryByTitle("Preview")).toBeNull();
  });

  it("polls a dev server answered starting until it runs, then shows its preview", async () => {
    const user = userEvent.setup();
    const base = { port: 5173, command: "npm install && npm run dev", logPath: "l", running: false };
    const startDevServer = vi.fn(async () => ({ ...base, status: "starting" as const }));
    const devServer = vi
      .fn()
      .mockResolvedValueOnce({ ...base, status: "starting" })
      .mockResolvedValueOnce({ ...base, running: true, status: "running" });
    const createPreview = vi.fn(async () => ({
      url: URL,
      expiresAt: "2026-12-03T12:00:00Z",
      visibility: "private" as const,
    }));
    renderWithApi(
      <Preview sessionId="s1" running pollMs={0} />,
      fakeApi({ ports: vi.fn(async () => ({ ports: [] })), startDevServer, devServer, createPreview }),
    );
    await user.click(await screen.findByRole("button", { name: "Start dev server" }));
    expect(await screen.findByTitle("Preview")).toHaveAttribute("src", URL);
    expect(devServer).toHaveBeenCalledTimes(2);
    expect(createPreview).toHaveBeenCalledWith("s1", 5173);
  });

  it("says a dev server exited while starting, with its log", async () => {
    const user = userEvent.setup();
    const base = { port: 5173, command: "npm run dev", logPath: "l", running: false };
    renderWithApi(
      <Preview sessionId="s1" running pollMs={0} />,
      fakeApi({
        ports: vi.fn(async () => ({ ports: [] })),
        startDevServer: vi.fn(async () => ({ ...base, status: "starting" as const })),
        devServer: vi.fn(async () => ({ ...base, status: "exited" as const, logTail: "EADDRINUSE" })),
      }),
    );
    await user.click(await screen.findByRole("button", { name: "Start dev server" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("exited before it listened");
    expect(screen.getByRole("alert")).toHaveTextContent("EADDRINUSE");
    expect(screen.queryByTitle("Preview")).toBeNull();
  });

  it("opens the editor in a tab of its own, or says why it cannot", async () => {
    const user = userEvent.setup();
    const tab = { location: { href: "" }, close: vi.fn() };
    vi.spyOn(window, "open").mockReturnValue(tab as unknown as Window);
    const missing = new ApiError(400, "code_server_missing", "code-server is not installed in the sandbox.");
    const startCodeEditor = vi
      .fn()
      .mockResolvedValueOnce({ port: 13337, command: "code-server", logPath: "l", running: true, url: URL })
      .mockRejectedValueOnce(missing);
    renderWithApi(
      <Preview sessionId="s1" running />,
      fakeApi({ ports: vi.fn(async () => ({ ports: [] })), startCodeEditor }),
    );
    await user.click(await screen.findByRole("button", { name: "Open editor" }));
    await vi.waitFor(() => expect(tab.location.href).toBe(URL));
    await user.click(screen.getByRole("button", { name: "Open editor" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("code-server is not installed");
    expect(tab.close).toHaveBeenCalled();
  });

  it("does not call the sandbox when it is not running", () => {
    renderWithApi(<Preview sessionId="s1" running={false} />, fakeApi());
    expect(screen.getByText(/resume it to preview/)).toBeInTheDocument();
  });
});
