// Test helpers: an Api whose operations are vi.fn()s, rendered inside the ApiContext.
import { render } from "@testing-library/react";
import type { ReactElement } from "react";
import { vi } from "vitest";
import type { Api, Chat, SandboxStatus, Session, SessionSummary } from "../api/client";
import { ApiContext } from "../api/context";

export function fakeApi(overrides: Partial<Api> = {}): Api {
  const unexpected = (name: string) => vi.fn(() => Promise.reject(new Error(`unexpected call: ${name}`)));
  return new Proxy(overrides as Api, {
    get(target, name: string) {
      if (!(name in target)) (target as Record<string, unknown>)[name] = unexpected(name);
      return (target as Record<string, unknown>)[name];
    },
  });
}

export function renderWithApi(ui: ReactElement, api: Api) {
  return render(<ApiContext.Provider value={api}>{ui}</ApiContext.Provider>);
}

export function summary(overrides: Partial<SessionSummary> = {}): SessionSummary {
  return {
    id: "s1",
    title: "Lisbon",
    status: "running",
    repoOwner: "acme",
    repoName: "app",
    branch: "as/1a2b3c4d",
    linesAdded: 0,
    linesRemoved: 0,
    prNumber: null,
    prStatus: null,
    lifecycleState: "active",
    createdAt: "2026-11-01T10:00:00Z",
    lastActivityAt: "2026-11-01T10:00:00Z",
    hasUnread: false,
    hasStreaming: false,
    latestChatId: "c1",
    ...overrides,
  };
}

/** A whole session (GET /api/sessions/{id}): the summary's fields and the rest. */
export function fullSession(overrides: Partial<Session> = {}): Session {
  return {
    ...summary(),
    cloneUrl: null,
    isNewBranch: true,
    autoCommitPushOverride: false,
    autoCreatePrOverride: false,
    askBeforeBash: false,
    lifecycleVersion: 1,
    lifecycleError: null,
    lifecycleErrorCode: null,
    hibernateAfter: null,
    sandboxExpiresAt: null,
    updatedAt: "2026-11-01T10:00:00Z",
    ...overrides,
  } as Session;
}

export function chat(overrides: Partial<Chat> = {}): Chat {
  return {
    id: "c1",
    sessionId: "s1",
    title: "New chat",
    modelId: null,
    activeStreamId: null,
    activeRunId: null,
    lastAssistantMessageAt: null,
    createdAt: "2026-11-01T10:00:00Z",
    updatedAt: "2026-11-01T10:00:00Z",
    hasUnread: false,
    isStreaming: false,
    ...overrides,
  };
}

export function sandboxStatus(
  lifecycle: Partial<SandboxStatus["lifecycle"]> = {},
  overrides: Partial<SandboxStatus> = {},
): SandboxStatus {
  return {
    status: "active",
    hasSnapshot: false,
    lifecycleVersion: 1,
    snapshot: null,
    ...overrides,
    lifecycle: {
      serverTime: 1_000_000,
      state: "active",
      lastActivityAt: 990_000,
      hibernateAfter: 1_300_000,
      sandboxExpiresAt: 9_000_000,
      error: null,
      errorCode: null,
      ...lifecycle,
    },
  };
}
