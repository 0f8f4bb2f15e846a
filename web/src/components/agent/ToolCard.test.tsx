import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { axeViolations } from "../../test/axe";
import { STOPPED, ToolCard, type ToolPart } from "./ToolCard";

const bash = (overrides: Partial<ToolPart>): ToolPart => ({
  type: "tool-bash",
  toolCallId: "call-1",
  state: "output-available",
  input: { command: "python3 -m unittest" },
  ...overrides,
});

describe("ToolCard", () => {
  it("shows a failing command's output plainly, not folded away", () => {
    const part = bash({ output: { exitCode: 1, stdout: "", stderr: "FAILED (failures=1)" } });
    render(<ToolCard part={part} live={false} />);
    const card = screen.getByRole("article", { name: "Tool bash" });
    expect(within(card).getByText("exit 1")).toHaveClass("badge-bad");
    const stderr = within(card).getByLabelText("Standard error");
    expect(stderr).toHaveTextContent("FAILED (failures=1)");
    expect(stderr.closest("details")).toBeNull(); // visible without a click
  });

  it("keeps a passing command's output under Output", () => {
    const part = bash({ output: { exitCode: 0, stdout: "OK", stderr: "" } });
    render(<ToolCard part={part} live={false} />);
    expect(screen.getByText("exit 0")).toHaveClass("badge-ok");
    expect(screen.getByLabelText("Standard output").closest("details")).not.toBeNull();
  });

  it("shows a running command's output so far when the stream carries it", () => {
    const part = bash({ output: { stdout: "Ran 3 tests\n" }, preliminary: true });
    render(<ToolCard part={part} live />);
    expect(screen.getByText("Running")).toBeInTheDocument();
    expect(screen.getByLabelText("Standard output")).toHaveTextContent("Ran 3 tests");
    expect(screen.queryByText(/^exit/)).toBeNull();
  });

  it("grows a running command's output as preliminary outputs come, then shows the result", () => {
    const running = (stdout: string, stderr = "") =>
      bash({ output: { status: "running", stdout, stderr, outputBytes: stdout.length }, preliminary: true });
    const { rerender } = render(<ToolCard part={running("line1\n")} live />);
    expect(screen.getByLabelText("Standard output")).toHaveTextContent("line1");
    rerender(<ToolCard part={running("line1\nline2\n", "warn\n")} live />);
    expect(screen.getByText("Running")).toBeInTheDocument();
    expect(screen.getByLabelText("Standard output").textContent).toBe("line1\nline2\n");
    expect(screen.getByLabelText("Standard error")).toHaveTextContent("warn");
    const done = bash({ output: { exitCode: 0, stdout: "line1\nline2\nline3\n", stderr: "" } });
    rerender(<ToolCard part={done} live={false} />);
    expect(screen.queryByText("Running")).toBeNull();
    expect(screen.getByText("exit 0")).toHaveClass("badge-ok");
    expect(screen.getByLabelText("Standard output").textContent).toBe("line1\nline2\nline3\n");
  });

  it("says Stopped, not a red Error, for a call ended by Stop", () => {
    const part = bash({ state: "output-error", errorText: STOPPED, output: undefined });
    render(<ToolCard part={part} live={false} />);
    const card = screen.getByRole("article", { name: "Tool bash" });
    expect(within(card).getByText("Stopped")).toBeInTheDocument();
    expect(within(card).queryByText("Error")).toBeNull();
    expect(card).not.toHaveClass("tool-state-output-error");
    expect(within(card).queryByRole("note")).toBeNull();
  });

  it("still says Error, with the text, for a tool that failed", () => {
    const part = bash({ state: "output-error", errorText: "sandbox is gone", output: undefined });
    render(<ToolCard part={part} live={false} />);
    expect(screen.getByText("Error")).toBeInTheDocument();
    expect(screen.getByRole("note")).toHaveTextContent("sandbox is gone");
  });

  it("makes its scrollable diff and outputs reachable with the keyboard", async () => {
    const write: ToolPart = {
      type: "tool-write",
      toolCallId: "call-2",
      state: "output-available",
      input: { filePath: "a.txt", content: "hello\n" },
      output: { bytes: 6 },
    };
    render(<ToolCard part={write} live={false} />);
    expect(screen.getByLabelText("Content of a.txt")).toHaveAttribute("tabindex", "0");
    expect(await axeViolations()).toEqual([]);
  });
});
