import { useId, useRef, useState, type FormEvent, type KeyboardEvent } from "react";
import { errorMessage } from "../api/errors";

interface Props {
  /** Posts the text; a rejection keeps it in the box for a retry. */
  onSend: (text: string) => Promise<void>;
  /** A turn runs: Send waits, Stop is offered. */
  running?: boolean;
  onStop?: () => Promise<void>;
  /** Why nothing can be sent now (an archived session): the box is off and says so. */
  disabledReason?: string | null;
}

/** The message box: Enter sends, Shift+Enter starts a new line. */
export function Composer({ onSend, running = false, onStop, disabledReason = null }: Props) {
  const id = useId();
  const off = disabledReason !== null;
  const [text, setText] = useState("");
  const [sending, setSending] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [stopping, setStopping] = useState(false);
  const form = useRef<HTMLFormElement>(null);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    if (!text.trim() || sending || running || off) return;
    setSending(true);
    setError(null);
    try {
      await onSend(text.trim());
      setText("");
    } catch (failure) {
      setError(`Not sent: ${errorMessage(failure)}`);
    } finally {
      setSending(false);
    }
  };
  const onKeyDown = (event: KeyboardEvent<HTMLTextAreaElement>) => {
    if (event.key === "Enter" && !event.shiftKey && !event.nativeEvent.isComposing) {
      event.preventDefault();
      form.current?.requestSubmit();
    }
  };
  return (
    <form className="composer" onSubmit={submit} ref={form}>
      <label htmlFor={id} className="visually-hidden">
        Message
      </label>
      <textarea
        id={id}
        value={text}
        rows={2}
        disabled={off}
        aria-describedby={off ? `${id}-off` : undefined}
        placeholder={off ? disabledReason : "Message (Enter to send, Shift+Enter for a new line)"}
        onChange={(event) => setText(event.target.value)}
        onKeyDown={onKeyDown}
      />
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
        <button type="submit" className="primary" disabled={off || sending || !text.trim()}>
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
