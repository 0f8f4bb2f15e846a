import { render, screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/http";
import { axeViolations } from "../test/axe";
import { fakeApi, renderWithApi } from "../test/fakes";
import { ToolCard, type ToolPart } from "./agent/ToolCard";
import { startedPorts } from "./PreviewCard";

const URL = "http://8123-abc.localhost:8000/__preview/auth?token=t&path=%2F";
const detached = (
  output: unknown,
  input: unknown = { command: "python3 -m http.server 8123", detached: true },
) => ({ type: "tool-bash", toolCallId: "call-1", state: "output-available", input, output }) as ToolPart;
const started = {
  pid: 7,
  log: "/tmp/l.log",
  output: "",
  message: "Started",
  ports: [8123],
  preview: "previewable",
};

function fakeTab() {
  const tab = { opener: {}, location: { href: "about:blank" }, close: vi.fn() };
  vi.spyOn(window, "open").mockReturnValue(tab as unknown as Window);
  return tab;
}

afterEach(() => vi.restoreAllMocks());

describe("PreviewCard", () => {
  it("offers Open preview for the port a detached command started, asking for the link on click", async () => {
    const user = userEvent.setup();
    const createPreview = vi.fn(async () => ({
      url: URL,
      expiresAt: "2026-12-03T12:00:00Z",
      visibility: "private" as const,
    }));
    const tab = fakeTab();
    const { container } = renderWithApi(
      <ToolCard part={detached(started)} live={false} sessionId="s1" />,
      fakeApi({ createPreview }),
    );
    const card = screen.getByRole("region", { name: "Server preview" });
    expect(card).toHaveTextContent("A server listens on port 8123.");
    expect(createPreview).not.toHaveBeenCalled(); // no link until asked: none stored either
    expect(container.innerHTML).not.toContain("token=");
    await user.click(screen.getByRole("button", { name: "Open preview of port 8123" }));
    expect(createPreview).toHaveBeenCalledWith("s1", 8123);
    expect(window.open).toHaveBeenCalledWith("about:blank", "_blank");
    expect(tab.opener).toBeNull();
    expect(tab.location.href).toBe(URL);
    expect(await axeViolations(container)).toEqual([]);
  });

  it("says why a link was refused, and closes the tab it opened", async () => {
    const user = userEvent.setup();
    const refused = new ApiError(409, "sandbox_not_running", "Sandbox is not running. Resume it first.");
    const tab = fakeTab();
    renderWithApi(
      <ToolCard part={detached(started)} live={false} sessionId="s1" />,
      fakeApi({ createPreview: vi.fn(async () => Promise.reject(refused)) }),
    );
    await user.click(screen.getByRole("button", { name: "Open preview of port 8123" }));
    expect(await screen.findByRole("alert")).toHaveTextContent("Resume it first");
    expect(tab.close).toHaveBeenCalled();
  });

  it("shows no card for a command that is not detached or named no port, and no button in a shared chat", () => {
    const { rerender } = render(<ToolCard part={detached({ ...started, ports: [] })} live={false} />);
    expect(screen.queryByRole("region", { name: "Server preview" })).toBeNull();
    rerender(
      <ToolCard
        part={detached({ exitCode: 0, stdout: "", stderr: "", ports: [8123] }, { command: "x" })}
        live={false}
      />,
    );
    expect(screen.queryByRole("region", { name: "Server preview" })).toBeNull();
    rerender(<ToolCard part={detached(started)} live={false} />);
    expect(screen.getByRole("region", { name: "Server preview" })).toHaveTextContent("port 8123");
    expect(screen.queryByRole("button", { name: /Open preview/ })).toBeNull();
  });

  it("takes only ports in range from the sandbox's word", () => {
    expect(startedPorts({ detached: true }, { ports: [8123, 0, 70000, "80", 1.5, 3000] })).toEqual([
      8123, 3000,
    ]);
    expect(startedPorts({ detached: false }, { ports: [8123] })).toEqual([]);
    expect(startedPorts(null, null)).toEqual([]);
  });
});
