import { act, fireEvent, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { ApiError } from "../api/http";
import { fakeApi, fullSession, renderWithApi } from "../test/fakes";
import { AskBeforeBash } from "./AskBeforeBash";

describe("AskBeforeBash", () => {
  it("saves the setting and tells the session to reload", async () => {
    const setAskBeforeBash = vi.fn(async () => ({ session: fullSession({ askBeforeBash: true }) }));
    const onChanged = vi.fn();
    renderWithApi(
      <AskBeforeBash sessionId="s1" asked={false} disabled={false} onChanged={onChanged} />,
      fakeApi({ setAskBeforeBash }),
    );
    await act(async () => {
      fireEvent.click(screen.getByRole("checkbox", { name: "Ask before running commands" }));
    });
    expect(setAskBeforeBash).toHaveBeenCalledWith("s1", true);
    expect(onChanged).toHaveBeenCalled();
  });

  it("says why a change failed and keeps the old value", async () => {
    const setAskBeforeBash = vi.fn(async () => {
      throw new ApiError(404, "not_found", "Session not found");
    });
    const onChanged = vi.fn();
    renderWithApi(
      <AskBeforeBash sessionId="s1" asked={false} disabled={false} onChanged={onChanged} />,
      fakeApi({ setAskBeforeBash }),
    );
    await act(async () => {
      fireEvent.click(screen.getByRole("checkbox", { name: "Ask before running commands" }));
    });
    expect(await screen.findByText(/Session not found/)).toBeInTheDocument();
    expect(onChanged).not.toHaveBeenCalled();
  });
});
