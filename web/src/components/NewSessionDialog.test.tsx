import { screen } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api } from "../api/client";
import { ApiError } from "../api/http";
import { chat, fakeApi, renderWithApi } from "../test/fakes";
import { NewSessionDialog, fieldOf, retryMessage } from "./NewSessionDialog";

async function setup(createSession: Api["createSession"]) {
  const onCreated = vi.fn();
  const preferences = vi.fn(async () => ({ defaultModelId: "m", autoCommitPush: true, autoCreatePr: false }));
  renderWithApi(
    <NewSessionDialog local onClose={vi.fn()} onCreated={onCreated} />,
    fakeApi({ createSession, preferences }),
  );
  await screen.findByRole("checkbox", { name: "Auto-commit and push", checked: true }); // preferences applied
  return { onCreated };
}

describe("NewSessionDialog", () => {
  it("is a labelled modal dialog that starts in the repository field", async () => {
    await setup(vi.fn());
    expect(screen.getByRole("dialog", { name: "New session" })).toHaveAttribute("aria-modal", "true");
    expect(screen.getByLabelText("Repository")).toHaveFocus();
  });

  it("creates a session on an existing branch with the toggles from the preferences", async () => {
    const createSession = vi.fn(async () => ({ session: { id: "s9" }, chat: chat({ id: "c9" }) }) as never);
    const { onCreated } = await setup(createSession);
    await userEvent.type(screen.getByLabelText("Repository"), "/srv/git/app.git");
    await userEvent.click(screen.getByRole("radio", { name: "Existing branch" }));
    await userEvent.clear(screen.getByLabelText("Branch name"));
    await userEvent.type(screen.getByLabelText("Branch name"), "develop");
    await userEvent.click(screen.getByRole("checkbox", { name: "Auto-create pull request" }));
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    expect(createSession).toHaveBeenCalledWith({
      repoUrl: "/srv/git/app.git",
      isNewBranch: false,
      branch: "develop",
      autoCommitPush: true,
      autoCreatePr: true,
    });
    expect(onCreated).toHaveBeenCalledWith("s9", "c9");
  });

  it("shows a validation error next to the field it names", async () => {
    await setup(
      vi.fn(async () =>
        Promise.reject(new ApiError(400, "invalid_input", "Invalid repository owner", "repoUrl")),
      ),
    );
    await userEvent.type(screen.getByLabelText("Repository"), "https://github.com/-/x");
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    const error = await screen.findByText("Invalid repository owner");
    const field = screen.getByLabelText("Repository");
    expect(field).toHaveAttribute("aria-invalid", "true");
    expect(field.getAttribute("aria-describedby")).toContain(error.id);
  });

  it("says when to try again after a 429", async () => {
    await setup(vi.fn(async () => Promise.reject(new ApiError(429, "rate_limited", "Too many", null, 42))));
    await userEvent.type(screen.getByLabelText("Repository"), "acme/app");
    await userEvent.click(screen.getByRole("button", { name: "Create session" }));
    expect(await screen.findByRole("alert")).toHaveTextContent(/Try again in 42 s \(at .+\)/);
  });

  it("maps API fields to form fields", () => {
    expect(fieldOf("cloneUrl")).toBe("repository");
    expect(fieldOf("repoOwner")).toBe("repository");
    expect(fieldOf("isNewBranch")).toBe("branch");
    expect(fieldOf("title")).toBe("title");
    expect(fieldOf(null)).toBe("form");
    expect(retryMessage(null)).toMatch(/a minute/);
  });
});

describe("the repository and branch pickers", () => {
  it("searches the repositories, picks one and its branch, and creates the session on them", async () => {
    const user = userEvent.setup();
    const repositories = vi.fn(async (query = "") => ({
      repositories: [
        { repoUrl: "/srv/git/app.git", name: "app", owner: null, private: false, defaultBranch: "main" },
        { repoUrl: "/srv/git/web.git", name: "web", owner: null, private: false, defaultBranch: "trunk" },
      ].filter((repo) => repo.name.includes(query)),
      next: null,
    }));
    const branches = vi.fn(async () => ({
      branches: [
        { name: "trunk", default: true },
        { name: "feature", default: false },
      ],
    }));
    const createSession = vi.fn(async () => ({ session: { id: "s9" }, chat: chat({ id: "c9" }) }) as never);
    const onCreated = vi.fn();
    renderWithApi(
      <NewSessionDialog local onClose={vi.fn()} onCreated={onCreated} />,
      fakeApi({
        repositories: repositories as Api["repositories"],
        branches,
        createSession,
        preferences: vi.fn(() => Promise.reject(new Error("offline"))),
      }),
    );
    const picker = await screen.findByLabelText("Repositories");
    await user.type(screen.getByLabelText("Search repositories"), "we");
    await vi.waitFor(() => expect(repositories).toHaveBeenLastCalledWith("we"));
    await vi.waitFor(() => expect(screen.queryByRole("option", { name: "app" })).toBeNull());
    await user.selectOptions(picker, "/srv/git/web.git");
    expect(screen.getByLabelText("Repository")).toHaveValue("/srv/git/web.git"); // the field stays for paste
    expect(branches).toHaveBeenCalledWith("/srv/git/web.git");
    await user.click(screen.getByLabelText("Existing branch"));
    const branch = await screen.findByLabelText("Branches of the repository");
    expect(branch).toHaveValue("trunk"); // the default first
    await user.selectOptions(branch, "feature");
    await user.click(screen.getByRole("button", { name: "Create session" }));
    expect(createSession).toHaveBeenCalledWith(
      expect.objectContaining({ repoUrl: "/srv/git/web.git", isNewBranch: false, branch: "feature" }),
    );
    expect(onCreated).toHaveBeenCalledWith("s9", "c9");
  });

  it("keeps only the URL field when the API lists no repositories", async () => {
    renderWithApi(
      <NewSessionDialog local={false} onClose={vi.fn()} onCreated={vi.fn()} />,
      fakeApi({
        repositories: vi.fn(() => Promise.reject(new ApiError(404, "not_found", "Not Found"))),
        preferences: vi.fn(() => Promise.reject(new Error("offline"))),
      }),
    );
    expect(await screen.findByLabelText("Repository")).toBeEnabled();
    expect(screen.queryByLabelText("Repositories")).toBeNull();
  });
});
