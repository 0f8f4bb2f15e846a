import { render, screen } from "@testing-library/react";
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
});
