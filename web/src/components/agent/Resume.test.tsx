// Following a chat's live run across reloads: an approval granted, its continued run, then a new
// turn reloaded mid-way (while its command runs and no event comes), as a user would.
import { act, screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import type { Api } from "../../api/client";
import type { AgentMessage, StreamPage } from "../../agent/stream";
import { ApiContext } from "../../api/context";
import { fakeApi, renderWithApi } from "../../test/fakes";
import { ChatPanel } from "../ChatPanel";

type Event = StreamPage["events"][number];
type Chunk = Event["chunk"];

/** A fake run on the server: its events so far and its status. */
interface FakeRun {
  runId: string;
  status: StreamPage["status"];
  events: Event[];
}

const numbered = (chunks: Chunk[]): Event[] => chunks.map((chunk, i) => ({ seq: i + 1, chunk }));

const approvalAsked = {
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
  ],
};

/** The continued run after Approve: the command's output, then the final text. */
const continued = numbered([
  {
    type: "tool-output-available",
    toolCallId: "call-1",
    output: { exitCode: 0, stdout: "gone\n", stderr: "" },
  },
  { type: "start-step" },
  { type: "text-start", id: "t1" },
  { type: "text-delta", id: "t1", delta: "The build folder is gone." },
  { type: "text-end", id: "t1" },
  { type: "finish-step" },
  { type: "finish", finishReason: "stop" },
]);

/** A long turn up to its command, which then runs (no event for a long while). */
const longTurn = numbered([
  { type: "start", messageId: "a2" },
  { type: "start-step" },
  { type: "text-start", id: "t2" },
  { type: "text-delta", id: "t2", delta: "Starting a long job." },
  { type: "text-end", id: "t2" },
  { type: "tool-input-start", toolCallId: "call-2", toolName: "bash" },
  { type: "tool-input-available", toolCallId: "call-2", toolName: "bash", input: { command: "sleep 60" } },
]);

/**
 * The stream endpoint over the chat's latest run: the events after `after` at once, else (a run
 * that goes on) a long poll that only an event would end (this fake never adds one), answered at
 * once when `wait` is 0.
 */
function server() {
  const chat: { latest: FakeRun | null } = { latest: null };
  const waiting: AbortSignal[] = []; // the long polls under way (each ends when aborted)
  const stream = vi.fn(
    (_chat: string, after: number, wait = 20, signal?: AbortSignal): Promise<StreamPage | null> => {
      const run = chat.latest;
      if (run === null) return Promise.resolve(null);
      const events = run.events.filter((e) => e.seq > after);
      const page = { runId: run.runId, status: run.status, events, next: events.at(-1)?.seq ?? after };
      if (events.length > 0 || wait === 0) return Promise.resolve(page);
      if (run.status !== "running") return Promise.resolve(null);
      // the command runs: nothing to say for now
      if (signal) waiting.push(signal);
      return new Promise<never>((_, reject) =>
        signal?.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))),
      );
    },
  );
  return { chat, stream, waiting };
}

function open(api: Partial<Api>) {
  return renderWithApi(
    <ChatPanel sessionId="s1" chatId="c1" onRead={vi.fn()} onSent={vi.fn()} />,
    fakeApi({
      markRead: vi.fn(async () => ({ success: true as const })),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      runs: vi.fn(async () => ({ runs: [], nextCursor: null })),
      ...api,
    }),
  );
}

afterEach(() => localStorage.clear());

describe("a chat's live run across reloads", () => {
  it("follows a turn sent after an approved one when reloaded while its command runs", async () => {
    const { chat, stream } = server();
    chat.latest = { runId: "r1", status: "waiting", events: [] };
    let stored: Array<Record<string, unknown>> = [
      { id: "u1", role: "user", parts: [{ type: "text", text: "Clear it" }] },
      approvalAsked,
    ];
    const messages = vi.fn(async () => ({ messages: stored, nextCursor: null }));
    const respond = vi.fn(async () => {
      chat.latest = { runId: "r2", status: "completed", events: continued };
      stored = [
        stored[0]!,
        { ...approvalAsked, parts: [{ type: "text", text: "The build folder is gone." }] },
      ];
      return { runId: "r2", status: "running" as const, pending: 0 };
    });
    const startTurn = vi.fn(async () => {
      chat.latest = { runId: "r3", status: "running", events: longTurn };
      return { runId: "r3", status: "running" as const };
    });
    const api = { messages, respond, startTurn, stream, stop: vi.fn() };
    const first = open(api);

    // Approve: the continued run streams into the same message and completes
    await userEvent.click(await screen.findByRole("button", { name: "Approve" }));
    expect(await screen.findByText("The build folder is gone.")).toBeInTheDocument();
    await screen.findByRole("button", { name: "Send" });

    // the next turn: it streams, then its command runs
    await userEvent.type(screen.getByRole("textbox", { name: "Message" }), "Run the long job{Enter}");
    const card = await screen.findByRole("article", { name: "Tool bash" }, { timeout: 4000 });
    expect(within(card).getByText("sleep 60")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Stop" })).toBeInTheDocument();

    // a reload while the command runs: the turn is followed again, at once, its text once
    stored = [
      ...stored,
      { id: "a2", role: "assistant", parts: [{ type: "text", text: "Starting a long job." }] },
    ];
    first.unmount();
    const calls = stream.mock.calls.length;
    open(api);
    expect(await screen.findByRole("button", { name: "Stop" })).toBeInTheDocument();
    await waitFor(() => expect(screen.getByText(/Working/)).toBeInTheDocument());
    expect(screen.getAllByText("Starting a long job.")).toHaveLength(1);
    expect(stream.mock.calls[calls]![1]).toBe(7); // from the checkpoint: the last event rendered
  });

  it("ends its long poll when the chat is left", async () => {
    const { chat, stream, waiting } = server();
    chat.latest = { runId: "r3", status: "running", events: longTurn };
    const view = open({ messages: vi.fn(async () => ({ messages: [], nextCursor: null })), stream });
    expect(await screen.findByRole("button", { name: "Stop" })).toBeInTheDocument();
    await waitFor(() => expect(waiting).toHaveLength(1));
    expect(waiting[0]!.aborted).toBe(false);
    view.unmount();
    expect(waiting[0]!.aborted).toBe(true); // its connection is free for the next chat's requests
  });

  it("answers a reload while the run is quiet at once (the first poll does not wait)", async () => {
    const { chat, stream } = server();
    chat.latest = { runId: "r3", status: "running", events: longTurn };
    localStorage.setItem(
      "openagents.run.c1",
      JSON.stringify({ runId: "r3", seq: 7, message: { id: "a2", role: "assistant", parts: [] } }),
    );
    open({ messages: vi.fn(async () => ({ messages: [], nextCursor: null })), stream, stop: vi.fn() });
    expect(await screen.findByRole("button", { name: "Stop" })).toBeInTheDocument();
    expect(stream).toHaveBeenCalledWith("c1", 7, 0, expect.any(AbortSignal));
    await act(async () => undefined);
  });

  it("opens a continued run without a checkpoint (another browser) on the message it continues", async () => {
    const { chat, stream } = server();
    const [step, bash] = approvalAsked.parts;
    const text = { type: "text", text: "I'll clear the build folder.", state: "done" };
    const asked = { ...approvalAsked, parts: [step, text, bash] };
    // as the run started from it: the call approved, its output not there yet
    const started = {
      ...asked,
      parts: [step, text, { ...bash, state: "approval-responded" }],
    } as AgentMessage;
    chat.latest = {
      runId: "r2",
      status: "running",
      events: numbered([{ type: "start", messageId: "a1" }, ...continued.map((e) => e.chunk).slice(0, 5)]),
    };
    // the page from seq 0 says which message the run continues, as it started from it
    const withContinues = vi.fn(
      async (id: string, after: number, wait?: number): Promise<StreamPage | null> => {
        const page = await stream(id, after, wait);
        return page && after === 0 ? { ...page, continues: started } : page;
      },
    );
    open({
      messages: vi.fn(async () => ({ messages: [asked], nextCursor: null })),
      stream: withContinues,
      stop: vi.fn(),
    });
    expect(await screen.findByText("The build folder is gone.")).toBeInTheDocument();
    expect(screen.getAllByText("I'll clear the build folder.")).toHaveLength(1);
    const card = screen.getByRole("article", { name: "Tool bash" });
    expect(within(card).getByText("exit 0")).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Stop" })).toBeInTheDocument();
  });
});

describe("the chat summary's activeRunId", () => {
  const props = { sessionId: "s1", chatId: "c1", onRead: vi.fn(), onSent: vi.fn() };
  const panelApi = (stream: Api["stream"]) =>
    fakeApi({
      markRead: vi.fn(async () => ({ success: true as const })),
      models: vi.fn(async () => ({ models: [], defaultModelId: null, message: null })),
      runs: vi.fn(async () => ({ runs: [], nextCursor: null })),
      messages: vi.fn(async () => ({ messages: [], nextCursor: null })),
      stream,
    });

  it("asks the stream nothing for a chat with no live run, and follows one the list shows later", async () => {
    const { chat, stream } = server();
    chat.latest = { runId: "r3", status: "running", events: longTurn };
    const api = panelApi(stream);
    const messages = api.messages;
    const view = renderWithApi(<ChatPanel {...props} activeRunId={null} />, api);
    await waitFor(() => expect(messages).toHaveBeenCalled());
    await act(async () => undefined);
    expect(stream).not.toHaveBeenCalled();
    expect(screen.getByRole("button", { name: "Send" })).toBeInTheDocument();
    // the list was stale: a reload of it names the run another client started
    view.rerender(
      <ApiContext.Provider value={api}>
        <ChatPanel {...props} activeRunId="r3" />
      </ApiContext.Provider>,
    );
    expect(await screen.findByRole("button", { name: "Stop" })).toBeInTheDocument();
    expect(await screen.findByText("Starting a long job.")).toBeInTheDocument();
    expect(stream).toHaveBeenCalledWith("c1", 0, 0, expect.any(AbortSignal));
  });

  it("asks from a kept checkpoint even when the list says no live run", async () => {
    const { chat, stream } = server();
    chat.latest = { runId: "r2", status: "completed", events: continued };
    localStorage.setItem("openagents.run.c1", JSON.stringify({ runId: "r2", seq: 5, message: null }));
    renderWithApi(<ChatPanel {...props} activeRunId={null} />, panelApi(stream));
    await waitFor(() => expect(stream).toHaveBeenCalledWith("c1", 5, 0, expect.any(AbortSignal)));
    await waitFor(() => expect(localStorage.getItem("openagents.run.c1")).toBeNull()); // the run ended
    expect(screen.getByRole("button", { name: "Send" })).toBeInTheDocument();
  });

  it("shows no live turn for a stale run id whose run has ended", async () => {
    const { chat, stream } = server();
    chat.latest = { runId: "r2", status: "completed", events: continued };
    renderWithApi(<ChatPanel {...props} activeRunId="r2" />, panelApi(stream));
    await waitFor(() => expect(stream).toHaveBeenCalledWith("c1", 0, 0, expect.any(AbortSignal)));
    await act(async () => undefined);
    expect(stream).toHaveBeenCalledTimes(1);
    expect(screen.queryByRole("button", { name: "Stop" })).toBeNull();
    expect(screen.queryByText("The build folder is gone.")).toBeNull(); // the stored messages show it
  });
});
