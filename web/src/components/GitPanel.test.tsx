import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, MergeReadiness } from "../api/client";
import { ApiError } from "../api/http";
import { axeViolations } from "../test/axe";
import { fakeApi, renderWithApi } from "../test/fakes";
import { MergePanel, ShipActions, checksSummary } from "./GitPanel";

const pr = { url: "https://github.com/acme/app/pull/7", title: "Add multiply", state: "open" as const };

function readiness(overrides: Partial<MergeReadiness> = {}): MergeReadiness {
  return {
    canMerge: false,
    reasons: ["1 check failed"],
    checks: { requiredTotal: 3, passed: 1, pending: 1, failed: 1 },
    allowedMethods: ["merge", "squash"],
    pr: {
      number: 7,
      ...pr,
      headBranch: "agent/x",
      baseBranch: "main",
      headSha: "a".repeat(40),
      mergeable: true,
      mergeableState: "unstable",
      draft: false,
    },
    ...overrides,
  } as MergeReadiness;
}

describe("ShipActions", () => {
  it("commits with a generated message when none is typed, then with the typed one", async () => {
    const user = userEvent.setup();
    const commit = vi.fn(async () => ({
      commit: "abc1234def",
      subject: "Add multiply",
      body: "",
      generated: true,
      branch: "agent/x",
    }));
    const onShipped = vi.fn();
    renderWithApi(<ShipActions sessionId="s1" dirty onShipped={onShipped} />, fakeApi({ commit }));
    await user.click(screen.getByRole("button", { name: "Commit" }));
    expect(commit).toHaveBeenCalledWith("s1", null);
    expect(await screen.findByRole("status")).toHaveTextContent("Committed abc1234: Add multiply");
    expect(onShipped).toHaveBeenCalledTimes(1);
    await user.type(screen.getByLabelText("Commit message (optional)"), "  Fix the sign  ");
    await user.click(screen.getByRole("button", { name: "Commit" }));
    expect(commit).toHaveBeenLastCalledWith("s1", "Fix the sign");
    expect(screen.getByLabelText("Commit message (optional)")).toHaveValue("");
    expect(await axeViolations()).toEqual([]);
  });

  it("says why a commit failed (the server's words) and keeps the message", async () => {
    const user = userEvent.setup();
    const commit = vi.fn(() =>
      Promise.reject(new ApiError(502, "generation_failed", "The model could not write a commit message")),
    );
    const onShipped = vi.fn();
    renderWithApi(
      <ShipActions sessionId="s1" dirty onShipped={onShipped} />,
      fakeApi({ commit: commit as Api["commit"] }),
    );
    await user.click(screen.getByRole("button", { name: "Commit" }));
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "Commit failed: The model could not write a commit message",
    );
    expect(onShipped).not.toHaveBeenCalled();
  });

  it("offers Commit and Discard only with uncommitted changes; Push and Create PR always", () => {
    renderWithApi(<ShipActions sessionId="s1" dirty={false} onShipped={vi.fn()} />, fakeApi());
    expect(screen.getByRole("button", { name: "Commit" })).toBeDisabled();
    expect(screen.getByRole("button", { name: "Discard" })).toBeDisabled();
    expect(screen.getByRole("button", { name: "Push" })).toBeEnabled();
    expect(screen.getByRole("button", { name: "Create PR" })).toBeEnabled();
    expect(screen.getByText("Nothing uncommitted to commit or discard.")).toBeInTheDocument();
  });

  it("discards only after the confirm dialog, and says what it put back", async () => {
    const user = userEvent.setup();
    const discard = vi.fn(async () => ({
      restored: ["a.py"],
      removed: ["new.txt", "tmp/x"],
      saved: { ref: "refs/openagents/checkpoints/d1", commit: "b".repeat(40), files: 3 },
    }));
    renderWithApi(<ShipActions sessionId="s1" dirty onShipped={vi.fn()} />, fakeApi({ discard }));
    await user.click(screen.getByRole("button", { name: "Discard" }));
    const dialog = screen.getByRole("dialog", { name: "Discard changes" });
    expect(discard).not.toHaveBeenCalled();
    await user.click(within(dialog).getByRole("button", { name: "Discard" }));
    expect(discard).toHaveBeenCalledWith("s1");
    expect(await screen.findByRole("status")).toHaveTextContent("Discarded: 1 restored, 2 removed");
  });

  it("pushes, then opens the pull request (a second call returns the same one)", async () => {
    const user = userEvent.setup();
    const push = vi.fn(async () => ({ branch: "agent/x", commit: "abc1234def", base: "main" }));
    let created = true;
    const openPullRequest = vi.fn(async () => {
      const answer = {
        pullRequest: { number: 7, headBranch: "agent/x", baseBranch: "main", ...pr },
        created,
      };
      created = false;
      return answer;
    });
    renderWithApi(
      <ShipActions sessionId="s1" dirty={false} onShipped={vi.fn()} />,
      fakeApi({ push, openPullRequest }),
    );
    await user.click(screen.getByRole("button", { name: "Push" }));
    expect(await screen.findByRole("status")).toHaveTextContent("Pushed agent/x at abc1234.");
    await user.click(screen.getByRole("button", { name: "Create PR" }));
    expect(openPullRequest).toHaveBeenCalledWith("s1");
    expect(await screen.findByText(/Opened PR #7 “Add multiply”/)).toBeInTheDocument();
    expect(screen.getByRole("link", { name: "Open it" })).toHaveAttribute("href", pr.url);
    await user.click(screen.getByRole("button", { name: "Create PR" }));
    expect(await screen.findByText(/Already open: PR #7/)).toBeInTheDocument();
  });
});

describe("MergePanel", () => {
  it("shows the checks and why it cannot merge before Merge, and starts a fix for failed checks", async () => {
    const user = userEvent.setup();
    const fixChecks = vi.fn(async () => ({
      runId: "r9",
      status: "running" as const,
      chatId: "c1",
      checks: [{ id: 11, name: "tests", conclusion: "failure" }],
    }));
    const merge = vi.fn();
    const onShipped = vi.fn();
    renderWithApi(
      <MergePanel sessionId="s1" onShipped={onShipped} />,
      fakeApi({ mergeReadiness: vi.fn(async () => readiness()), fixChecks, merge }),
    );
    expect(await screen.findByText("1 of 3 checks passed, 1 pending, 1 failed")).toBeInTheDocument();
    expect(
      within(screen.getByRole("list", { name: "Why it cannot be merged yet" })).getByText("1 check failed"),
    ).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Merge" })).toBeDisabled();
    await user.click(screen.getByRole("button", { name: "Fix checks" }));
    expect(fixChecks).toHaveBeenCalledWith("s1");
    expect(await screen.findByRole("status")).toHaveTextContent("The agent is fixing tests in the chat.");
    expect(onShipped).toHaveBeenCalled();
    expect(merge).not.toHaveBeenCalled();
    expect(await axeViolations()).toEqual([]);
  });

  it("merges a ready pull request with the method picked", async () => {
    const user = userEvent.setup();
    const merge = vi.fn(async () => ({}) as Awaited<ReturnType<Api["merge"]>>);
    const ready = readiness({
      canMerge: true,
      reasons: [],
      checks: { requiredTotal: 2, passed: 2, pending: 0, failed: 0 },
    });
    renderWithApi(
      <MergePanel sessionId="s1" onShipped={vi.fn()} />,
      fakeApi({ mergeReadiness: vi.fn(async () => ready), merge }),
    );
    expect(await screen.findByText("Ready to merge.")).toBeInTheDocument();
    expect(screen.queryByRole("button", { name: "Fix checks" })).toBeNull();
    await user.selectOptions(screen.getByLabelText("Merge method"), "squash");
    await user.click(screen.getByRole("button", { name: "Merge" }));
    expect(merge).toHaveBeenCalledWith("s1", "squash");
    await waitFor(() => expect(screen.getByRole("status")).toHaveTextContent("Merged PR #7."));
  });

  it("says the checks in words", () => {
    expect(checksSummary({ requiredTotal: 0, passed: 0, pending: 0, failed: 0 })).toBeNull();
    expect(checksSummary({ requiredTotal: 2, passed: 2, pending: 0, failed: 0 })).toBe(
      "2 of 2 checks passed",
    );
  });
});
