import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api } from "../api/client";
import { ApiError } from "../api/http";
import { axeViolations } from "../test/axe";
import { fakeApi, fullSession, renderWithApi } from "../test/fakes";
import { Changes } from "./Changes";
import { PublishRepository } from "./GitPanel";

const listed = {
  repositories: [
    { repoUrl: "/srv/repos/app.git", name: "app", owner: null, private: null, defaultBranch: "main" },
  ],
  next: null,
};

describe("PublishRepository", () => {
  it("publishes to a repository picked from the list, then reloads the session", async () => {
    const user = userEvent.setup();
    const attachRepository = vi.fn(async () => ({
      session: fullSession({ repoOwner: null, repoName: "app", branch: "as/0123abcd" }),
    }));
    const onPublished = vi.fn();
    renderWithApi(
      <PublishRepository sessionId="s1" onPublished={onPublished} />,
      fakeApi({
        attachRepository: attachRepository as Api["attachRepository"],
        repositories: vi.fn(async () => listed) as Api["repositories"],
      }),
    );
    await user.selectOptions(await screen.findByLabelText("Repositories"), "/srv/repos/app.git");
    expect(screen.getByLabelText("Repository")).toHaveValue("/srv/repos/app.git");
    await user.click(screen.getByRole("button", { name: "Publish" }));
    expect(attachRepository).toHaveBeenCalledWith("s1", { repoUrl: "/srv/repos/app.git" });
    expect(await screen.findByRole("status")).toHaveTextContent("Published to app on as/0123abcd.");
    expect(onPublished).toHaveBeenCalledTimes(1);
    expect(await axeViolations()).toEqual([]);
  });

  it("creates a new GitHub repository, and shows the API's refusal in its words", async () => {
    const user = userEvent.setup();
    const attachRepository = vi.fn(() =>
      Promise.reject(
        new ApiError(
          400,
          "no_git_host",
          "Creating repositories needs GitHub; on one machine, run git init",
          "create",
        ),
      ),
    );
    const onPublished = vi.fn();
    renderWithApi(
      <PublishRepository sessionId="s1" onPublished={onPublished} />,
      fakeApi({
        attachRepository: attachRepository as Api["attachRepository"],
        repositories: vi.fn(() => Promise.reject(new ApiError(503, "unavailable", "down"))),
      }),
    );
    await user.click(screen.getByLabelText("A new GitHub repository"));
    await user.type(screen.getByLabelText("New repository name"), "fresh-app");
    await user.click(screen.getByLabelText("Private"));
    await user.click(screen.getByRole("button", { name: "Publish" }));
    expect(attachRepository).toHaveBeenCalledWith("s1", { create: { name: "fresh-app", private: false } });
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "Publish failed: Creating repositories needs GitHub; on one machine, run git init",
    );
    expect(onPublished).not.toHaveBeenCalled();
  });

  it("asks for a repository before calling the API", async () => {
    const user = userEvent.setup();
    const attachRepository = vi.fn();
    renderWithApi(
      <PublishRepository sessionId="s1" onPublished={vi.fn()} />,
      fakeApi({
        attachRepository: attachRepository as unknown as Api["attachRepository"],
        repositories: vi.fn(async () => ({ repositories: [], next: null })) as Api["repositories"],
      }),
    );
    await user.click(screen.getByRole("button", { name: "Publish" }));
    expect(screen.getByRole("alert")).toHaveTextContent("Pick or paste a repository first.");
    expect(attachRepository).not.toHaveBeenCalled();
  });

  it("is offered in Changes only while the session has no repository and the sandbox runs", async () => {
    const api = fakeApi({
      repositories: vi.fn(async () => listed) as Api["repositories"],
      gitStatus: vi.fn(() => new Promise(() => undefined)) as unknown as Api["gitStatus"],
      diff: vi.fn(() => new Promise(() => undefined)) as unknown as Api["diff"],
    });
    const first = renderWithApi(<Changes sessionId="s1" diff="live" hasRepository={false} />, api);
    expect(screen.getByRole("heading", { name: "Publish to a repository" })).toBeInTheDocument();
    await waitFor(() => expect(screen.getByLabelText("Repositories")).toBeInTheDocument());
    first.unmount();
    renderWithApi(<Changes sessionId="s1" diff="live" hasRepository />, api);
    expect(screen.queryByRole("heading", { name: "Publish to a repository" })).not.toBeInTheDocument();
    renderWithApi(<Changes sessionId="s2" diff="cached" hasRepository={false} />, fakeApi());
    expect(await screen.findByRole("alert")).toBeInTheDocument(); // the cached diff's answer
    expect(screen.queryByRole("heading", { name: "Publish to a repository" })).not.toBeInTheDocument();
  });
});
