import { render, screen, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import { fakeApi, renderWithApi } from "../test/fakes";
import { Changes } from "./Changes";
import { UnifiedDiff, diffLineKind } from "./UnifiedDiff";

const DIFF = [
  "diff --git a/app.py b/app.py",
  "index 1a2b3c4..5d6e7f8 100644",
  "--- a/app.py",
  "+++ b/app.py",
  "@@ -1,2 +1,2 @@",
  " import os",
  '-print("hello")',
  '+print("hello, world")',
  "",
].join("\n");

describe("UnifiedDiff", () => {
  it("tells added, removed, hunk, header and context lines apart", () => {
    expect(
      ["+x", "-x", "@@ -1 +1 @@", "+++ b/x", "--- a/x", "diff --git a/x b/x", " x", ""].map(diffLineKind),
    ).toEqual(["added", "removed", "hunk", "meta", "meta", "meta", "context", "context"]);
  });

  it("colours each line by its kind, one line a span", () => {
    render(<UnifiedDiff diff={DIFF} label="Diff of app.py" />);
    const diff = screen.getByLabelText("Diff of app.py");
    const kinds = [...diff.querySelectorAll(".diff-line")].map((line) =>
      line.className.replace("diff-line ", ""),
    );
    expect(kinds).toEqual([
      "diff-meta",
      "diff-meta",
      "diff-meta",
      "diff-meta",
      "diff-hunk",
      "diff-context",
      "diff-removed",
      "diff-added",
    ]);
    expect(diff.querySelector(".diff-added")).toHaveTextContent('+print("hello, world")');
  });

  it("is how the Changes tab shows a file's diff", async () => {
    const api = fakeApi({
      gitStatus: vi.fn(async () => ({
        branch: "as/1",
        ahead: 0,
        behind: 0,
        stagedCount: 0,
        unstagedCount: 1,
        untrackedCount: 0,
        uncommittedFiles: [{ path: "app.py", status: "M" }],
      })) as never,
      diff: vi.fn(async () => ({
        base: "abc",
        totalAdditions: 1,
        totalDeletions: 1,
        files: [{ path: "app.py", status: "modified", additions: 1, deletions: 1, diff: DIFF }],
      })) as never,
    });
    renderWithApi(<Changes sessionId="s1" diff="live" />, api);
    await userEvent.click(await screen.findByText("app.py", { selector: "summary" }));
    const diff = screen.getByLabelText("Diff of app.py");
    expect(within(diff).getByText('-print("hello")')).toHaveClass("diff-removed");
    expect(within(diff).getByText("@@ -1,2 +1,2 @@")).toHaveClass("diff-hunk");
  });
});
