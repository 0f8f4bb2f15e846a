import {
  useId,
  useRef,
  useState,
  type ClipboardEvent,
  type DragEvent,
  type FormEvent,
  type KeyboardEvent,
} from "react";
import { filePart, type Attachment, type FilePart, type Skill } from "../api/client";
import { errorMessage } from "../api/errors";
import { useSkillMenu } from "./SkillMenu";

/** A file added to the message: uploading, uploaded (its part), or refused (why). */
interface Pending {
  key: number;
  name: string;
  part?: FilePart;
  error?: string;
}

interface Props {
  /** Posts the text and the uploaded files' parts; a rejection keeps both for a retry. */
  onSend: (text: string, files: FilePart[]) => Promise<void>;
  /** Uploads a pasted, dropped or picked file (images, text files); without it none are taken. */
  onUpload?: (file: File) => Promise<Attachment>;
  /** A turn runs: Send waits, Stop is offered. */
  running?: boolean;
  onStop?: () => Promise<void>;
  /** Why nothing can be sent now (an archived session): the box is off and says so. */
  disabledReason?: string | null;
  /** The session's skills, offered after `/` (SkillMenu.tsx). */
  loadSkills?: () => Promise<Skill[]>;
}

/** The message box: Enter sends, Shift+Enter starts a new line. */
export function Composer({
  onSend,
  onUpload,
  running = false,
  onStop,
  disabledReason = null,
  loadSkills,
}: Props) {
  const id = useId();
  const off = disabledReason !== null;
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [stopping, setStopping] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  const [files, setFiles] = useState<Pending[]>([]);
  const nextKey = useRef(0);
  const uploading = files.some((file) => !file.part && !file.error);
  const ready = files.flatMap((file) => (file.part ? [file.part] : []));
  const skills = useSkillMenu({ text, setText, loadSkills: off ? undefined : loadSkills });
  const add = (list: Iterable<File>) => {
    if (!onUpload || off) return;
    for (const file of list) {
      const key = nextKey.current++;
      setFiles((now) => [...now, { key, name: file.name || "pasted file" }]);
      onUpload(file).then(
        (attachment) =>
          setFiles((now) => now.map((f) => (f.key === key ? { ...f, part: filePart(attachment) } : f))),
        (failure: unknown) =>
          setFiles((now) => now.map((f) => (f.key === key ? { ...f, error: errorMessage(failure) } : f))),
      );
    }
  };
  const onPaste = (event: ClipboardEvent<HTMLTextAreaElement>) => {
    const pasted = Array.from(event.clipboardData.files);
    if (pasted.length === 0 || !onUpload) return; // plain text pastes as ever
    event.preventDefault();
    add(pasted);
  };
  const onDrop = (event: DragEvent<HTMLFormElement>) => {
    if (!onUpload || event.dataTransfer.files.length === 0) return;
    event.preventDefault();
    add(Array.from(event.dataTransfer.files));
  };
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if ((!text.trim() && ready.length === 0) || uploading || sending || running || off) return;
    setSending(true);
    setError(null);
    try {
      await onSend(text.trim(), ready);
      setText("");
      setFiles([]);
    } catch (failure) {
      setError(`Not sent: ${errorMessage(failure)}`);
    } finally {
      setSending(false);
    }
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (skills.onKeyDown(event)) return;
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      form.current?.requestSubmit();
    }
  };
  return (
    <form
      className="composer"
      onSubmit={submit}
      ref={form}
      onDragOver={(event) => onUpload && event.preventDefault()}
      onDrop={onDrop}
    >
      {files.length > 0 && (
        <ul className="composer-files" aria-label="Attached files">
          {files.map((file) => (
            <li key={file.key} className={file.error ? "file-chip file-chip-error" : "file-chip"}>
              <span>{file.name}</span>
              {!file.part && !file.error && <span className="file-chip-state"> · uploading…</span>}
              {file.error && <span className="file-chip-state"> · not attached: {file.error}</span>}
              <button
                type="button"
                className="file-chip-remove"
                aria-label={`Remove ${file.name}`}
                onClick={() => setFiles((now) => now.filter((f) => f.key !== file.key))}
              >
                ×
              </button>
            </li>
          ))}
        </ul>
      )}
      {skills.menu}
      <label htmlFor={id} className="visually-hidden">
        Message
      </label>
      <textarea
        id={id}
        {...skills.boxProps}
        value={text}
        rows={2}
        disabled={off}
        aria-describedby={off ? `${id}-off` : undefined}
        placeholder={off ? disabledReason : "Message (Enter to send, Shift+Enter for a new line)"}
        onChange={(event) => setText(event.target.value)}
        onKeyDown={onKeyDown}
        onPaste={onPaste}
      />
      {onUpload && !off && (
        <label className="composer-attach">
          Attach
          <input
            type="file"
            multiple
            className="visually-hidden"
            accept="image/png,image/jpeg,image/webp,image/gif,text/*,.md,.json,.yaml,.yml,.toml,.py,.ts,.tsx,.js,.rs,.go,.java,.sh,.sql,.csv"
            onChange={(event) => {
              add(Array.from(event.target.files ?? []));
              event.target.value = "";
            }}
          />
        </label>
      )}
      {running && onStop ? (
        <button
          type="button"
          className="danger"
          disabled={stopping}
          onClick={async () => {
            setStopping(true);
            setError(null);
            try {
              await onStop();
            } catch (failure) {
              setError(`Not stopped: ${errorMessage(failure)}`);
            } finally {
              setStopping(false);
            }
          }}
        >
          {stopping ? "Stopping…" : "Stop"}
        </button>
      ) : (
        <button
          type="submit"
          className="primary"
          disabled={off || sending || uploading || (!text.trim() && ready.length === 0)}
        >
          {sending ? "Sending…" : "Send"}
        </button>
      )}
      {off && (
        <p id={`${id}-off`} className="composer-off">
          {disabledReason}
        </p>
      )}
      {error && (
        <p role="alert" className="form-error">
          {error}
        </p>
      )}
    </form>
  );
}
