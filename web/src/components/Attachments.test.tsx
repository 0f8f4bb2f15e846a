// Attachments (issue 25): the composer takes pasted, dropped and picked files (chips with
// remove, uploaded at once, sent as file parts); a user message shows image thumbnails and file chips.
import { fireEvent, render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { describe, expect, it, vi } from "vitest";
import type { Api, Attachment } from "../api/client";
import { ApiContext } from "../api/context";
import { ApiError } from "../api/http";
import { axeViolations } from "../test/axe";
import { Composer } from "./Composer";
import { MessageView } from "./agent/MessageView";

const png = () => new File([new Uint8Array([0x89, 0x50, 0x4e, 0x47])], "shot.png", { type: "image/png" });
const notes = () => new File(["# Notes"], "notes.md", { type: "text/markdown" });

function uploaded(file: File, n: number): Attachment {
  return {
    id: `a${n}`,
    url: `/api/sessions/s1/attachments/a${n}`,
    mediaType: file.type,
    size: file.size,
    filename: file.name,
  };
}

function setup() {
  let n = 0;
  const onUpload = vi.fn(async (file: File) => uploaded(file, ++n));
  const onSend = vi.fn(async () => {});
  render(<Composer onSend={onSend} onUpload={onUpload} />);
  return { onUpload, onSend, box: screen.getByLabelText("Message") };
}

describe("the composer's attachments", () => {
  it("uploads a pasted image and sends it as a file part with the text", async () => {
    const { onUpload, onSend, box } = setup();
    fireEvent.paste(box, { clipboardData: { files: [png()], getData: () => "" } });
    await screen.findByText("shot.png");
    expect(onUpload).toHaveBeenCalledTimes(1);
    await userEvent.type(box, "what is this?");
    await waitFor(() => expect(screen.getByRole("button", { name: "Send" })).toBeEnabled());
    await userEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSend).toHaveBeenCalledWith("what is this?", [
      { type: "file", mediaType: "image/png", filename: "shot.png", url: "/api/sessions/s1/attachments/a1" },
    ]);
    await waitFor(() => expect(screen.queryByText("shot.png")).toBeNull()); // the chips go with the send
  });

  it("takes dropped files, and a chip's remove leaves it out of the message", async () => {
    const { onSend, box } = setup();
    const form = box.closest("form")!;
    fireEvent.drop(form, { dataTransfer: { files: [png(), notes()] } });
    await screen.findByText("notes.md");
    await userEvent.click(screen.getByRole("button", { name: "Remove shot.png" }));
    expect(screen.queryByText("shot.png")).toBeNull();
    expect(await axeViolations()).toEqual([]);
    await userEvent.click(screen.getByRole("button", { name: "Send" })); // files alone may be sent
    expect(onSend).toHaveBeenCalledWith("", [
      {
        type: "file",
        mediaType: "text/markdown",
        filename: "notes.md",
        url: "/api/sessions/s1/attachments/a2",
      },
    ]);
  });

  it("waits for an upload before sending, and says why one was refused", async () => {
    let finish: (a: Attachment) => void = () => {};
    const onUpload = vi
      .fn<(file: File) => Promise<Attachment>>()
      .mockImplementationOnce(() => new Promise((resolve) => (finish = resolve)))
      .mockRejectedValueOnce(
        new ApiError(400, "invalid_input", "mediaType says image/png but the file is not", "mediaType"),
      );
    const onSend = vi.fn(async () => {});
    render(<Composer onSend={onSend} onUpload={onUpload} />);
    const box = screen.getByLabelText("Message");
    await userEvent.type(box, "hi");
    await userEvent.upload(screen.getByLabelText("Attach"), [png(), notes()]);
    expect(await screen.findByText(/not attached: mediaType says image\/png/)).toBeInTheDocument();
    expect(screen.getByRole("button", { name: "Send" })).toBeDisabled(); // shot.png still uploading
    finish(uploaded(png(), 1));
    await waitFor(() => expect(screen.getByRole("button", { name: "Send" })).toBeEnabled());
    await userEvent.click(screen.getByRole("button", { name: "Send" }));
    expect(onSend).toHaveBeenCalledWith("hi", [
      expect.objectContaining({ url: "/api/sessions/s1/attachments/a1" }),
    ]);
  });

  it("takes no files without an upload", () => {
    render(<Composer onSend={vi.fn(async () => {})} />);
    expect(screen.queryByLabelText("Attach")).toBeNull();
  });
});

describe("a user message's files", () => {
  it("shows an image as a thumbnail and a text file as a chip", async () => {
    const attachmentBlob = vi.fn(async () => new Blob(["png"], { type: "image/png" }));
    const created = vi.fn(() => "blob:thumb");
    Object.assign(URL, { createObjectURL: created, revokeObjectURL: vi.fn() });
    const api = { attachmentBlob } as unknown as Api;
    render(
      <ApiContext.Provider value={api}>
        <MessageView
          message={{
            id: "m1",
            role: "user",
            parts: [
              { type: "text", text: "look" },
              {
                type: "file",
                mediaType: "image/png",
                filename: "shot.png",
                url: "/api/sessions/s1/attachments/a1",
              },
              {
                type: "file",
                mediaType: "text/markdown",
                filename: "notes.md",
                url: "/api/sessions/s1/attachments/a2",
              },
            ],
          }}
        />
      </ApiContext.Provider>,
    );
    const image = await screen.findByRole("img", { name: "shot.png" });
    expect(image).toHaveAttribute("src", "blob:thumb");
    expect(attachmentBlob).toHaveBeenCalledWith("/api/sessions/s1/attachments/a1");
    expect(screen.getByText("notes.md")).toBeInTheDocument();
    expect(await axeViolations()).toEqual([]);
  });
});
