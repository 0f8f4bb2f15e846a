import { screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, Preferences } from "../api/client";
import { ApiError } from "../api/http";
import { fakeApi, renderWithApi } from "../test/fakes";
import { PreferencesDialog } from "./PreferencesDialog";

const models = {
  models: [
    { id: "bedrock/claude", provider: "bedrock" },
    { id: "scripted/default", provider: "scripted" },
  ],
  defaultModelId: "bedrock/claude",
  message: null,
} as unknown as Awaited<ReturnType<Api["models"]>>;

function setup(
  setPreferences: Api["setPreferences"],
  stored: Preferences = { defaultModelId: null, autoCommitPush: false, autoCreatePr: false },
) {
  const onClose = vi.fn();
  const preferences = vi.fn(async () => stored);
  renderWithApi(
    <PreferencesDialog onClose={onClose} />,
    fakeApi({ preferences, setPreferences, models: vi.fn(async () => models) }),
  );
  return { onClose };
}

describe("PreferencesDialog", () => {
  it("shows the stored preferences and saves the edited ones with PUT", async () => {
    const setPreferences = vi.fn(async (body: Parameters<Api["setPreferences"]>[0]) => ({
      defaultModelId: null,
      ...body,
    }));
    const { onClose } = setup(setPreferences);
    const model = await screen.findByRole("combobox", { name: "Default model" });
    expect(model).toHaveValue("");
    const autoPr = screen.getByRole("checkbox", { name: /Auto-create a pull request/ });
    expect(autoPr).toBeDisabled(); // auto-PR needs auto-commit
    await userEvent.selectOptions(model, "scripted/default");
    await userEvent.click(screen.getByRole("checkbox", { name: /Auto-commit and push/ }));
    expect(autoPr).toBeEnabled();
    await userEvent.click(autoPr);
    await userEvent.click(screen.getByRole("button", { name: "Save" }));
    expect(setPreferences).toHaveBeenCalledWith({
      defaultModelId: "scripted/default",
      autoCommitPush: true,
      autoCreatePr: true,
    });
    await waitFor(() => expect(onClose).toHaveBeenCalled());
  });

  it("never saves auto-PR without auto-commit, and names a model no longer configured", async () => {
    const setPreferences = vi.fn(async (body: Parameters<Api["setPreferences"]>[0]) => ({
      defaultModelId: null,
      ...body,
    }));
    setup(setPreferences, { defaultModelId: "openai/gone", autoCommitPush: true, autoCreatePr: true });
    const model = await screen.findByRole("combobox", { name: "Default model" });
    expect(model).toHaveValue("openai/gone");
    expect(screen.getByRole("option", { name: "openai/gone (not configured)" })).toBeInTheDocument();
    await userEvent.click(screen.getByRole("checkbox", { name: /Auto-commit and push/ }));
    await userEvent.selectOptions(model, "");
    await userEvent.click(screen.getByRole("button", { name: "Save" }));
    expect(setPreferences).toHaveBeenCalledWith({
      defaultModelId: null,
      autoCommitPush: false,
      autoCreatePr: false,
    });
  });

  it("shows the server's error beside the field it names and stays open", async () => {
    const setPreferences = vi.fn(() =>
      Promise.reject(
        new ApiError(422, "validation_error", "String should have at most 200 characters", "defaultModelId"),
      ),
    );
    const { onClose } = setup(setPreferences);
    await userEvent.click(await screen.findByRole("button", { name: "Save" }));
    const model = screen.getByRole("combobox", { name: "Default model" });
    expect(await screen.findByRole("alert")).toHaveTextContent("String should have at most 200 characters");
    expect(model).toHaveAttribute("aria-invalid", "true");
    expect(model).toHaveAccessibleDescription("String should have at most 200 characters");
    expect(onClose).not.toHaveBeenCalled();
  });

  it("says when the preferences cannot be loaded", async () => {
    renderWithApi(
      <PreferencesDialog onClose={vi.fn()} />,
      fakeApi({
        preferences: vi.fn(() => Promise.reject(new Error("store unavailable"))),
        models: vi.fn(async () => models),
      }),
    );
    expect(await screen.findByRole("alert")).toHaveTextContent(
      "Could not load the preferences: store unavailable",
    );
    expect(screen.queryByRole("button", { name: "Save" })).toBeNull();
  });
});
