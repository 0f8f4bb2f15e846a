import { render, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Api } from "../../api/client";
import { saveCheckpoint } from "../../agent/checkpoint";
import approvalRun from "../../agent/fixtures/approval-question.json";
import scriptedRun from "../../agent/fixtures/scripted-turn.json";
import type { StreamPage } from "../../agent/stream";
import { chat, fakeApi, renderWithApi } from "../../test/fakes";
import { ChatTabs } from "../ChatTabs";
import { ChatPanel } from "../ChatPanel";
import { ModelPicker } from "./ModelPicker";
import { RunList } from "./RunList";
import { ToolCard } from "./ToolCard";

const models = { models: [], defaultModelId: null, message: null };
const noModels = {
  models: [],
  defaultModelId: null,
  message: "No model is configured: set OPENAGENTS_MODELS (bedrock/… or openai/…).",
};

/**
 * A stream endpoint over a recorded run, `size` events a page; past the last event it long-polls
 * as if the run went on (the tests look at the streamed message, not at the stored one).
 */
function streamOver(run: StreamPage, size = 6) {
  return vi.fn(async (_chat: string, after: number) => {
    const events = run.events.filter((e) => e.seq > after).slice(0, size);
    if (events.length === 0) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      return { runId: run.runId, status: "running" as const, events: [], next: after };
    }
    const done = events.at(-1)!.seq >= run.events.at(-1)!.seq;
    return { runId: run.runId, status: done ? run.status : "running", events, next: events.at(-1)!.seq };
  });
}

function panel(api: Partial<Api>) {
  const full = fakeApi({
    messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
    markRead: vi.fn(async () => ({ success: true as const })),
    models: vi.fn(async () => models),
    ...api,
  });
  renderWithApi(<ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />, full);
  return full;
}

afterEach(() => localStorage.clear());

describe("the agent in the chat", () => {
  it(
    "streams a turn: markdown text, collapsed reasoning, tool cards with a diff and exit codes",
    { timeout: 15000 },
    async () => {
      let started = false;
      const recorded = streamOver(scriptedRun as StreamPage);
      const stream = vi.fn(async (chat: string, after: number) => (started ? recorded(chat, after) : null));
      const startTurn = vi.fn(async () => {
        started = true;
        return { runId: scriptedRun.runId, status: "running" as const };
      });
      panel({ stream, startTurn });
      await userEvent.type(await screen.findByRole("textbox", { name: "Message" }), "Add multiply{Enter}");
      expect(startTurn).toHaveBeenCalled();
      await screen.findByText(/is in multiply.py, test_multiply.py covers it/, {}, { timeout: 4000 });
      const done = () => screen.getByText(/is in multiply.py, test_multiply.py covers it/);
      await waitFor(
        () => expect(done().closest(".markdown")?.querySelector("code")).toHaveTextContent("multiply(a, b)"),
        { timeout: 8000 },
      );
      const reasoning = screen.getByText("Reasoning").closest("details")!;
      expect(reasoning).not.toHaveAttribute("open");
      const writes = screen.getAllByRole("article", { name: "Tool write" });
      expect(writes).toHaveLength(2);
      expect(within(writes[0]!).getByText("multiply.py")).toBeInTheDocument();
      expect(
        within(writes[0]!).getByLabelText("Content of multiply.py").querySelector(".diff-added"),
      ).not.toBeNull();
      const bash = screen.getAllByRole("article", { name: "Tool bash" });
      expect(within(bash[0]!).getByText("exit 0")).toBeInTheDocument();
      expect(within(bash[0]!).getByText("Output").closest("details")).not.toHaveAttribute("open");
      // the stream was read in seq order, each page after the last one
      const afters = stream.mock.calls.map((call) => call[1]);
      expect(afters).toEqual([...afters].sort((a, b) => a - b));
    },
  );

  it("offers Stop while the turn runs", async () => {
    const stop = vi.fn(async () => ({ success: true as const, runId: "r", status: "running" as const }));
    let stopped = false;
    const stream = vi.fn(async (_chat: string, after: number) => {
      if (stopped)
        return after >= 4
          ? null
          : {
              runId: "r",
              status: "aborted" as const,
              next: 4,
              events: [
                { seq: 3, chunk: { type: "abort", reason: "stopped" } },
                { seq: 4, chunk: { type: "finish", finishReason: "other" } },
              ],
            };
      await new Promise((resolve) => setTimeout(resolve, 20));
      return after === 0
        ? {
            runId: "r",
            status: "running" as const,
            next: 2,
            events: [
              { seq: 1, chunk: { type: "start", messageId: "a1" } },
              { seq: 2, chunk: { type: "start-step" } },
            ],
          }
        : { runId: "r", status: "running" as const, next: after, events: [] };
    });
    saveCheckpoint("c1", { runId: "r", seq: 0, message: null });
    panel({
      stream,
      stop: vi.fn(async () => {
        stopped = true;
        return stop();
      }),
    });
    const button = await screen.findByRole("button", { name: "Stop" });
    expect(screen.getByText(/Working|Starting/)).toBeInTheDocument();
    await userEvent.click(button);
    expect(stop).toHaveBeenCalled();
    expect(await screen.findByText("Stopped.")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Send" })).toBeInTheDocument();
  });

  it("resumes a reloaded chat from its checkpoint's seq", async () => {
    const whole = scriptedRun as StreamPage;
    const stream = streamOver(whole);
    const message = {
      id: whole.events[0]!.chunk.messageId as string,
      role: "assistant" as const,
      parts: [
        { type: "step-start" as const },
        { type: "text" as const, text: "Earlier text.", state: "done" as const },
      ],
    };
    saveCheckpoint("c1", { runId: whole.runId, seq: 31, message });
    panel({ stream });
    await screen.findByText(/covers it, and the change is committed/, {}, { timeout: 4000 });
    expect(stream.mock.calls[0]![1]).toBe(31);
    expect(screen.getAllByText("Earlier text.")).toHaveLength(1);
    expect(JSON.parse(localStorage.getItem("openagents.run.c1")!)).toMatchObject({ seq: 38 });
  });

  it("answers an approval and a question in place", async () => {
    const stored = {
      id: "a1",
      role: "assistant" as const,
      parts: [
        { type: "step-start" },
        {
          type: "tool-bash",
          toolCallId: "call-1",
          state: "approval-requested",
          input: { command: "rm -rf build" },
          approval: { id: "approval-call-1", reason: "The command deletes files recursively (rm -rf)" },
        },
        {
          type: "tool-ask_user_question",
          toolCallId: "call-2",
          state: "input-available",
          input: approvalRun.events[7]!.chunk.input,
        },
      ],
    };
    const respond = vi
      .fn()
      .mockResolvedValueOnce({ runId: "r1", status: "waiting", pending: 1 })
      .mockResolvedValueOnce({ runId: "r2", status: "running", pending: 0 });
    panel({
      messages: vi.fn(async () => ({ messages: [stored], nextCursor: null })),
      stream: vi.fn(async () => null),
      respond,
    });
    expect(await screen.findByText("The command deletes files recursively (rm -rf)")).toBeInTheDocument();
    await userEvent.click(screen.getByRole("button", { name: "Deny…" }));
    await userEvent.type(screen.getByLabelText(/Reason/), "keep the build");
    await userEvent.click(screen.getByRole("button", { name: "Deny" }));
    expect(respond).toHaveBeenCalledWith("c1", {
      toolCallId: "call-1",
      approved: false,
      reason: "keep the build",
    });
    await waitFor(() => expect(screen.queryByRole("button", { name: "Deny…" })).toBeNull());
    const question = screen.getByRole("form", { name: "Question" });
    expect(within(question).getByRole("button", { name: "Answer" })).toBeDisabled();
    await userEvent.click(within(question).getByRole("radio", { name: /Go/ }));
    await userEvent.click(within(question).getByRole("button", { name: "Answer" }));
    expect(respond).toHaveBeenLastCalledWith("c1", {
      toolCallId: "call-2",
      answers: { "Which language?": "Go" },
    });
  });
});

describe("ToolCard", () => {
  it("shows an edit as a coloured diff and a failed command's exit code", () => {
    render(
      <>
        <ToolCard
          live={false}
          part={{
            type: "tool-edit",
            toolCallId: "e",
            state: "output-available",
            input: { filePath: "a.py", oldString: "x = 1", newString: "x = 2" },
            output: "Replaced 1 occurrence(s)",
          }}
        />
        <ToolCard
          live={false}
          part={{
            type: "tool-bash",
            toolCallId: "b",
            state: "output-available",
            input: { command: "pytest -q" },
            output: { exitCode: 1, stdout: "1 failed", stderr: "" },
          }}
        />
        <ToolCard
          live={false}
          part={{
            type: "tool-read",
            toolCallId: "r",
            state: "output-error",
            input: { filePath: "x" },
            errorText: "No such file: x",
          }}
        />
      </>,
    );
    const diff = screen.getByLabelText("Edit of a.py");
    expect(diff.querySelector(".diff-removed")).toHaveTextContent("- x = 1");
    expect(diff.querySelector(".diff-added")).toHaveTextContent("+ x = 2");
    expect(screen.getByText("exit 1")).toHaveClass("badge-bad");
    expect(screen.getByText("pytest -q")).toBeInTheDocument();
    expect(screen.getByText("No such file: x")).toBeInTheDocument();
    expect(screen.getByText("Error")).toBeInTheDocument();
  });
});

describe("ModelPicker", () => {
  it("says plainly that no model is configured, with the settings", async () => {
    renderWithApi(
      <ModelPicker sessionId="s1" chatId="c1" modelId={null} onChanged={vi.fn()} />,
      fakeApi({ models: vi.fn(async () => noModels) }),
    );
    expect(await screen.findByText("No model is configured.")).toBeInTheDocument();
    expect(screen.getByRole("status")).toHaveTextContent("OPENAGENTS_MODELS");
  });

  it("sets the chat's model", async () => {
    const setChatModel = vi.fn(async () => ({}) as never);
    const onChanged = vi.fn();
    const list = [
      { id: "bedrock/claude", provider: "bedrock", name: "claude", contextWindow: 200000 },
      { id: "openai/qwen3", provider: "openai", name: "qwen3", contextWindow: 32000 },
    ];
    renderWithApi(
      <ModelPicker sessionId="s1" chatId="c1" modelId="gone/model" onChanged={onChanged} />,
      fakeApi({
        models: vi.fn(async () => ({ models: list, defaultModelId: "bedrock/claude" })),
        setChatModel,
      }),
    );
    const select = await screen.findByLabelText("Model");
    expect(select).toHaveValue("bedrock/claude");
    expect(screen.getByText(/gone\/model unavailable/)).toBeInTheDocument();
    await userEvent.selectOptions(select, "openai/qwen3");
    expect(setChatModel).toHaveBeenCalledWith("s1", "c1", "openai/qwen3");
    await waitFor(() => expect(onChanged).toHaveBeenCalled());
  });
});

describe("RunList", () => {
  it("lists the session's runs with their status, usage and error", async () => {
    const run = (overrides: object) => ({
      runId: "r1",
      chatId: "c1",
      messageId: "u1",
      assistantMessageId: "a1",
      modelId: "scripted/default",
      status: "completed" as const,
      steps: 3,
      reverted: false,
      usage: { inputTokens: 530, outputTokens: 15, cacheReadTokens: 0, cacheWriteTokens: 0 },
      startedAt: "2026-12-01T10:00:00Z",
      finishedAt: "2026-12-01T10:00:03.400Z",
      ...overrides,
    });
    const runs = vi.fn(async () => ({
      runs: [
        run({ runId: "r2", status: "failed", error: "scripted model has no response for step 1" }),
        run({}),
      ],
      nextCursor: null,
    }));
    renderWithApi(<RunList sessionId="s1" />, fakeApi({ runs }));
    expect(await screen.findByText("Completed")).toBeInTheDocument();
    expect(screen.getAllByText("in 3.4 s")).toHaveLength(2);
    expect(screen.getAllByText(/3 steps · 530 in · 15 out/)).toHaveLength(2);
    expect(screen.getByText("scripted model has no response for step 1")).toBeInTheDocument();
    expect(runs).toHaveBeenCalledWith("s1");
  });
});

describe("Working badges", () => {
  it("shows Working on a streaming chat tab", () => {
    render(
      <ChatTabs
        chats={[chat({ isStreaming: true, title: "Agent" })]}
        activeId="c1"
        onSelect={vi.fn()}
        onCreate={vi.fn()}
        onRename={vi.fn()}
        onDelete={vi.fn()}
      />,
    );
    expect(screen.getByRole("tab", { name: "Agent, working" })).toHaveTextContent("Working");
  });
});
