// The operations the app uses, each a typed call of the OpenAPI schema.
import type { components } from "./schema.gen";
import type { Call, RequestBody } from "./http";
import type { StreamPage } from "../agent/stream";

type S = components["schemas"];
export type SessionSummary = S["SessionSummaryOut"];
export type SessionList = S["SessionListOut"];
export type Session = S["SessionOut"];
export type Chat = S["ChatOut"];
export type SandboxStatus = S["SandboxStatusOut"];
export type LifecycleState = S["LifecycleState"];
export type FileEntry = S["FileEntry"];
export type GitStatus = S["GitStatusOut"];
export type Diff = S["DiffOut"];
export type AuditEvent = S["EventOut"];
export type ModelList = S["ModelListOut"];
export type Run = S["RunOut"];
export type RunStatus = S["RunStatus"];
export type RevertAnswer = S["RevertOut"];
export type RespondBody = RequestBody<"/api/chat/{chat_id}/respond", "post">;
export type CreateSessionBody = RequestBody<"/api/sessions", "post">;
export type Preferences = S["PreferencesBody"];
export type PrStatus = S["PrStatus"];
export type ListeningPort = S["PortOut"];
export type DevServer = S["DevServerOut"];
export type CommitAnswer = S["CommitOut"];
export type DiscardAnswer = S["DiscardOut"];
export type PushAnswer = S["PushOut"];
export type PullRequest = S["PullRequestOut"];
export type PullRequestBody = RequestBody<"/api/sessions/{session_id}/pr", "post">;
export type MergeReadiness = S["ReadinessOut"];
export type AttachRepositoryBody = RequestBody<"/api/sessions/{session_id}/repository", "post">;
export type MergeMethod = MergeReadiness["allowedMethods"][number];

export type Repository = S["RepositoryOut"];
export type RepositoryPage = S["RepositoriesOut"];
export type Branch = S["BranchOut"];
export type Skill = S["SkillOut"];
export type UsageTokens = S["UsageTotalsOut"];
export type UsageDay = S["UsageDayOut"];
export type UsageReport = S["functions__api__picker_schemas__UsageOut"];

/** A UI message as stored (the API keeps the whole object). */
export type UIMessage = {
  id: string;
  role: "user" | "assistant";
  parts: Array<{ type: string; text?: string } | FilePart>;
  metadata?: unknown;
};
/** An uploaded attachment (POST /api/sessions/{id}/attachments). */
export type Attachment = S["AttachmentOut"];
/** An AI SDK `file` part naming an uploaded attachment (the message keeps the URL, not bytes). */
export interface FilePart {
  type: "file";
  mediaType: string;
  filename?: string;
  url: string;
}
export const filePart = (attachment: Attachment): FilePart => ({
  type: "file",
  mediaType: attachment.mediaType,
  ...(attachment.filename ? { filename: attachment.filename } : {}),
  url: attachment.url,
});

export type ListFilter = S["ListFilter"];
export const ARCHIVED_PAGE_SIZE = 50;
/** Messages per page: the chat opens on its newest page and pages up as the reader scrolls. */
export const MESSAGE_PAGE_SIZE = 50;
/** The `before` value of a chat's newest page. */
export const END = "end";
export type SharedChat = S["SharedChatOut"];

export function createApi(call: Call) {
  const session = (id: string) => ({ session_id: id });
  const chat = (id: string, chatId: string) => ({ session_id: id, chat_id: chatId });
  return {
    listSessions: (status: ListFilter, cursor?: string | null, limit?: number) =>
      call("get", "/api/sessions", { query: { status, cursor, limit } }),
    createSession: (body: CreateSessionBody) => call("post", "/api/sessions", { body }),
    getSession: (id: string) => call("get", "/api/sessions/{session_id}", { params: session(id) }),
    setSessionStatus: (id: string, status: "archived" | "running") =>
      call("patch", "/api/sessions/{session_id}", { params: session(id), body: { status } }),
    setAskBeforeBash: (id: string, askBeforeBash: boolean) =>
      call("patch", "/api/sessions/{session_id}", { params: session(id), body: { askBeforeBash } }),
    events: (id: string, cursor?: string | null) =>
      call("get", "/api/sessions/{session_id}/events", { params: session(id), query: { cursor } }),

    listChats: (id: string) => call("get", "/api/sessions/{session_id}/chats", { params: session(id) }),
    createChat: (id: string, chatId: string) =>
      call("post", "/api/sessions/{session_id}/chats", { params: session(id), body: { id: chatId } }),
    renameChat: (id: string, chatId: string, title: string) =>
      call("patch", "/api/sessions/{session_id}/chats/{chat_id}", {
        params: chat(id, chatId),
        body: { title },
      }),
    deleteChat: (id: string, chatId: string) =>
      call("delete", "/api/sessions/{session_id}/chats/{chat_id}", { params: chat(id, chatId) }),
    markRead: (id: string, chatId: string) =>
      call("post", "/api/sessions/{session_id}/chats/{chat_id}/read", { params: chat(id, chatId) }),
    /** The page before `before` (END: the newest page), oldest first; its `nextCursor` is the
     * `before` of the page above it. */
    messages: (id: string, chatId: string, before: string = END, limit = MESSAGE_PAGE_SIZE) =>
      call("get", "/api/sessions/{session_id}/chats/{chat_id}/messages", {
        params: chat(id, chatId),
        query: { before, limit },
      }),
    deleteFrom: (id: string, chatId: string, messageId: string) =>
      call("delete", "/api/sessions/{session_id}/chats/{chat_id}/messages/{message_id}", {
        params: { ...chat(id, chatId), message_id: messageId },
      }),
    forkChat: (id: string, chatId: string, messageId: string) =>
      call("post", "/api/sessions/{session_id}/chats/{chat_id}/fork", {
        params: chat(id, chatId),
        body: { messageId, id: crypto.randomUUID() },
      }),
    getShare: (id: string, chatId: string) =>
      call("get", "/api/sessions/{session_id}/chats/{chat_id}/share", { params: chat(id, chatId) }),
    sharePreview: (id: string, chatId: string) =>
      call("get", "/api/sessions/{session_id}/chats/{chat_id}/share/preview", { params: chat(id, chatId) }),
    share: (id: string, chatId: string) =>
      call("post", "/api/sessions/{session_id}/chats/{chat_id}/share", { params: chat(id, chatId) }),
    unshare: (id: string, chatId: string) =>
      call("delete", "/api/sessions/{session_id}/chats/{chat_id}/share", { params: chat(id, chatId) }),
    postMessage: (id: string, chatId: string, message: UIMessage) =>
      call("post", "/api/sessions/{session_id}/chats/{chat_id}/messages", {
        params: chat(id, chatId),
        body: { message },
      }),

    sandboxStatus: (id: string) => call("get", "/api/sandbox/status", { query: { sessionId: id } }),
    pause: (id: string) => call("post", "/api/sandbox/snapshot", { body: { sessionId: id } }),
    resume: (id: string) => call("put", "/api/sandbox/snapshot", { body: { sessionId: id } }),
    retryProvisioning: (id: string) => call("post", "/api/sandbox", { body: { sessionId: id } }),
    files: (id: string, path: string) =>
      call("get", "/api/sessions/{session_id}/sandbox/files", {
        params: session(id),
        query: { path, depth: 1 },
      }),
    fileContent: (id: string, path: string) =>
      call("get", "/api/sessions/{session_id}/sandbox/files/content", {
        params: session(id),
        query: { path },
      }),
    gitStatus: (id: string) =>
      call("get", "/api/sessions/{session_id}/sandbox/git-status", { params: session(id) }),
    diff: (id: string) => call("get", "/api/sessions/{session_id}/sandbox/diff", { params: session(id) }),
    cachedDiff: (id: string) =>
      call("get", "/api/sessions/{session_id}/sandbox/diff/cached", { params: session(id) }),
    ports: (id: string) => call("get", "/api/sessions/{session_id}/ports", { params: session(id) }),
    startDevServer: (id: string) =>
      call("post", "/api/sessions/{session_id}/dev-server", { params: session(id), body: {} }),
    devServer: (id: string) => call("get", "/api/sessions/{session_id}/dev-server", { params: session(id) }),
    stopDevServer: (id: string) =>
      call("delete", "/api/sessions/{session_id}/dev-server", { params: session(id) }),
    startCodeEditor: (id: string) =>
      call("post", "/api/sessions/{session_id}/code-editor", { params: session(id) }),
    createPreview: (id: string, port: number) =>
      call("post", "/api/sessions/{session_id}/ports/{port}/preview", {
        params: { session_id: id, port: String(port) },
        body: { path: "/", visibility: "private" },
      }),
    makePreviewPublic: (id: string, port: number) =>
      call("post", "/api/sessions/{session_id}/ports/{port}/preview", {
        params: { session_id: id, port: String(port) },
        body: { path: "/", visibility: "public" },
      }),
    revokePreview: (id: string, port: number) =>
      call("delete", "/api/sessions/{session_id}/ports/{port}/preview", {
        params: { session_id: id, port: String(port) },
      }),
    publicPreviews: (id: string) =>
      call("get", "/api/sessions/{session_id}/previews", { params: session(id) }),

    startTurn: (sessionId: string, chatId: string, message: UIMessage, modelId?: string | null) =>
      call("post", "/api/chat", {
        body: { sessionId, chatId, message, ...(modelId ? { modelId } : {}) } as RequestBody<
          "/api/chat",
          "post"
        >,
      }),
    /** One long poll of the chat's latest run; null when there is nothing (204). */
    stream: (chatId: string, after: number, wait = 20, signal?: AbortSignal) =>
      call("get", "/api/chat/{chat_id}/stream", {
        params: { chat_id: chatId },
        query: { after, wait },
        signal,
      }) as Promise<StreamPage | null>,
    stop: (chatId: string) => call("post", "/api/chat/{chat_id}/stop", { params: { chat_id: chatId } }),
    /** Upload a file for a message of the session: its bytes, its type claimed (the server sniffs). */
    uploadAttachment: async (sessionId: string, file: File): Promise<Attachment> => {
      if (!call.raw) throw new Error("uploads need a call with raw requests");
      const response = await call.raw("post", `/api/sessions/${encodeURIComponent(sessionId)}/attachments`, {
        body: file,
        contentType: file.type,
        query: file.name ? { filename: file.name } : {},
      });
      return (await response.json()) as Attachment;
    },
    /** An attachment's bytes (its URL needs the token, so an <img> gets them as a blob). */
    attachmentBlob: async (url: string): Promise<Blob> => {
      if (!call.raw) throw new Error("attachments need a call with raw requests");
      return (await call.raw("get", url)).blob();
    },
    respond: (chatId: string, body: RespondBody) =>
      call("post", "/api/chat/{chat_id}/respond", { params: { chat_id: chatId }, body }),
    runs: (id: string, cursor?: string | null) =>
      call("get", "/api/sessions/{session_id}/runs", { params: session(id), query: { cursor } }),
    /** The workspace back to before the run's first tool step (`dryRun`: only list the files). */
    revertRun: (id: string, runId: string, dryRun: boolean) =>
      call("post", "/api/sessions/{session_id}/runs/{run_id}/revert", {
        params: { session_id: id, run_id: runId },
        query: { dryRun },
      }),
    models: () => call("get", "/api/models"),
    setChatModel: (id: string, chatId: string, modelId: string) =>
      call("patch", "/api/sessions/{session_id}/chats/{chat_id}", {
        params: chat(id, chatId),
        body: { modelId },
      }),

    commit: (id: string, message?: string | null) =>
      call("post", "/api/sessions/{session_id}/commit", {
        params: session(id),
        body: message ? { message } : {},
      }),
    discard: (id: string, paths?: string[]) =>
      call("post", "/api/sessions/{session_id}/discard", {
        params: session(id),
        body: paths ? { paths } : {},
      }),
    push: (id: string) => call("post", "/api/sessions/{session_id}/push", { params: session(id) }),
    attachRepository: (id: string, body: AttachRepositoryBody) =>
      call("post", "/api/sessions/{session_id}/repository", { params: session(id), body }),
    openPullRequest: (id: string, body: Partial<PullRequestBody> = {}) =>
      call("post", "/api/sessions/{session_id}/pr", {
        params: session(id),
        body: body as PullRequestBody,
      }),
    mergeReadiness: (id: string) =>
      call("get", "/api/sessions/{session_id}/merge-readiness", { params: session(id) }),
    merge: (id: string, method?: MergeMethod) =>
      call("post", "/api/sessions/{session_id}/merge", {
        params: session(id),
        body: method ? { method } : undefined,
      }),
    fixChecks: (id: string, checkRunIds?: number[]) =>
      call("post", "/api/sessions/{session_id}/checks/fix", {
        params: session(id),
        body: checkRunIds ? { checkRunIds } : {},
      }),
    repositories: (query = "", cursor?: string | null) =>
      call("get", "/api/repositories", { query: { query: query || undefined, cursor } }),
    branches: (repoUrl: string) => call("get", "/api/repositories/branches", { query: { repoUrl } }),
    skills: (id: string) => call("get", "/api/sessions/{session_id}/skills", { params: session(id) }),
    usage: (from: string, to: string) => call("get", "/api/usage", { query: { from, to } }),

    preferences: () => call("get", "/api/user/preferences"),
    setPreferences: (body: Preferences) => call("put", "/api/user/preferences", { body }),
  };
}

export type Api = ReturnType<typeof createApi>;

/** The public share-link routes (no token). */
export function createSharedApi(call: Call) {
  const share = (shareId: string) => ({ params: { share_id: shareId } });
  return {
    transcript: (shareId: string) => call("get", "/api/shared/{share_id}", share(shareId)),
    status: (shareId: string) => call("get", "/api/shared/{share_id}/status", share(shareId)),
  };
}

export type SharedApi = ReturnType<typeof createSharedApi>;

/** A chat's public address (the read-only page). */
export function shareUrl(shareId: string, origin = window.location.origin): string {
  return `${origin}/shared/${encodeURIComponent(shareId)}`;
}
