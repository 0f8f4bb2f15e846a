import { render, screen, within } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { DataPartCard, commitOutcome, prOutcome } from "./DataPartCard";
import { MessageView } from "./MessageView";

describe("data parts", () => {
  it("reads the auto-commit outcome (services/auto_commit.py) and the reference's data-pr", () => {
    expect(
      commitOutcome({
        branch: "as/1",
        base: "main",
        committed: true,
        commit: "1a2b3c4d5e6f7a8b feat: add greeting",
        pushed: true,
      }),
    ).toEqual({
      committed: true,
      pushed: true,
      branch: "as/1",
      sha: "1a2b3c4d5e6f",
      subject: "feat: add greeting",
      skipped: null,
    });
    expect(commitOutcome({ pushed: false, skipped: "nothing to commit or push" }).skipped).toBe(
      "nothing to commit or push",
    );
    expect(prOutcome({ prNumber: 9, prUrl: "https://github.com/acme/app/pull/9" })).toEqual({
      number: 9,
      title: null,
      state: null,
      url: "https://github.com/acme/app/pull/9",
      status: null,
      skipped: null,
    });
    expect(prOutcome({ pr: "skipped: no git host or default branch" }).skipped).toBe(
      "no git host or default branch",
    );
    expect(
      prOutcome({ status: "skipped", skipReason: "Auto-commit did not leave origin in sync with HEAD" })
        .skipped,
    ).toBe("Auto-commit did not leave origin in sync with HEAD");
    expect(prOutcome({ prNumber: 1, prUrl: "javascript:alert(1)" }).url).toBeNull();
  });

  it("renders the ship routes' cards (docs/api.md): commit, push and PR, linked", () => {
    const sha = "0123456789abcdef0123456789abcdef01234567";
    render(
      <>
        <DataPartCard
          type="data-commit"
          data={{ commit: sha, subject: "Add multiply", branch: "agent/x", source: "button" }}
        />
        <DataPartCard
          type="data-push"
          data={{ branch: "agent/x", commit: sha, pushed: true, reason: null, source: "auto" }}
        />
        <DataPartCard
          type="data-push"
          data={{
            branch: "agent/x",
            commit: null,
            pushed: false,
            reason: "the git host refused",
            source: "auto",
          }}
        />
        <DataPartCard
          type="data-pr"
          data={{
            number: 7,
            title: "Add multiply",
            state: "open",
            url: "https://github.com/acme/app/pull/7",
            created: true,
            source: "button",
          }}
        />
      </>,
    );
    const commit = screen.getByRole("article", { name: "Commit" });
    expect(commit).toHaveTextContent("Committed");
    expect(commit).toHaveTextContent("0123456789ab");
    expect(commit).toHaveTextContent("Add multiply");
    const [pushed, refused] = screen.getAllByRole("article", { name: "Push" });
    expect(pushed).toHaveTextContent("Pushed");
    expect(pushed).toHaveTextContent("agent/x");
    expect(refused).toHaveTextContent("Not pushed");
    expect(refused).toHaveTextContent("The git host refused.");
    const pr = screen.getByRole("article", { name: "Pull request" });
    expect(within(pr).getByRole("link", { name: "PR #7" })).toHaveAttribute(
      "href",
      "https://github.com/acme/app/pull/7",
    );
    expect(pr).toHaveTextContent("open");
    expect(pr).toHaveTextContent("Add multiply");
  });

  it("renders a commit as a card: hash, branch, pushed, subject", () => {
    render(
      <DataPartCard
        type="data-commit"
        data={{ branch: "as/1", committed: true, commit: "1a2b3c4 feat: add greeting", pushed: true }}
      />,
    );
    const card = screen.getByRole("article", { name: "Commit" });
    expect(card).toHaveTextContent("Committed1a2b3c4on as/1pushed");
    expect(card).toHaveTextContent("feat: add greeting");
  });

  it("renders a skipped commit with its reason in words", () => {
    render(
      <DataPartCard type="data-commit" data={{ pushed: false, skipped: "nothing to commit or push" }} />,
    );
    expect(screen.getByRole("article", { name: "Commit" })).toHaveTextContent(
      "Not committedNothing to commit or push.",
    );
  });

  it("renders a pull request as a card linking to it, or why there is none", () => {
    render(
      <DataPartCard
        type="data-pr"
        data={{ prNumber: 9, prUrl: "https://github.com/acme/app/pull/9", status: "created" }}
      />,
    );
    expect(screen.getByRole("link", { name: "PR #9" })).toHaveAttribute(
      "href",
      "https://github.com/acme/app/pull/9",
    );
    expect(screen.getByRole("article", { name: "Pull request" })).toHaveTextContent("created");
    render(<DataPartCard type="data-pr" data={{ pr: "skipped: no git host or default branch" }} />);
    expect(screen.getByText("No pull request: no git host or default branch.")).toBeInTheDocument();
  });

  it("places the cards inline in the assistant's message, other data parts as a labelled line", () => {
    render(
      <MessageView
        message={{
          id: "a1",
          role: "assistant",
          parts: [
            { type: "text", text: "Done." },
            {
              type: "data-commit",
              data: { committed: true, commit: "1a2b3c4", pushed: true, branch: "as/1" },
            },
            { type: "data-pr", data: { prNumber: 9 } },
            { type: "data-other", data: { x: 1 } },
          ],
        }}
      />,
    );
    expect(screen.getByRole("article", { name: "Commit" })).toBeInTheDocument();
    expect(screen.getByRole("article", { name: "Pull request" })).toHaveTextContent("PR #9");
    expect(screen.getByText("other")).toHaveClass("badge");
  });

  it("shows a model-capacity wait as waiting while its retry is ahead, and as waited after", () => {
    const data = { reason: "model capacity", retryAt: "2026-12-04T12:00:30Z", error: "Throttled" };
    const at = Date.parse("2026-12-04T12:00:30Z");
    const { unmount } = render(<DataPartCard type="data-waiting" data={data} now={at - 10_000} />);
    const card = screen.getByRole("status", { name: "Waiting" });
    expect(within(card).getByText("Waiting for model capacity")).toBeTruthy();
    expect(within(card).getByText(/^Retrying at /)).toBeTruthy();
    expect(within(card).queryByText(/\{/)).toBeNull(); // not the raw JSON of a generic part
    unmount();
    render(<DataPartCard type="data-waiting" data={data} now={at + 1} />);
    expect(screen.getByText("Waited for model capacity")).toBeTruthy();
    expect(screen.getByText(/^Retried at /)).toBeTruthy();
  });
});
