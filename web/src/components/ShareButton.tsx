import { useEffect, useState } from "react";
import { shareUrl } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";
import { Modal } from "./Modal";

interface Props {
  sessionId: string;
  chatId: string;
}

interface Preview {
  markdown: string;
  redactions: number;
}

/** Share the chat: first what the link will show (secrets redacted), then a public read-only
 * link to copy, and a way to revoke it. */
export function ShareButton({ sessionId, chatId }: Props) {
  const api = useApi();
  const [link, setLink] = useState<string | null>(null);
  const [preview, setPreview] = useState<Preview | null>(null);
  const [state, setState] = useState<{ text: string; alert: boolean } | null>(null);
  useEffect(() => {
    // a chat shared before (another visit, a reload) shows its link and Stop sharing at once
    let live = true;
    api.getShare(sessionId, chatId).then(
      ({ shareId }) => live && setLink((current) => current ?? (shareId ? shareUrl(shareId) : null)),
      () => undefined, // unknown: Share stays, and answers with the existing link if there is one
    );
    return () => {
      live = false;
    };
  }, [api, sessionId, chatId]);
  const act = async (action: () => Promise<void>) => {
    setState(null);
    try {
      await action();
    } catch (failure) {
      setState({ text: errorMessage(failure), alert: true });
    }
  };
  const look = () =>
    act(async () => {
      const { markdown, redactions } = await api.sharePreview(sessionId, chatId);
      setPreview({ markdown, redactions });
    });
  const share = () =>
    act(async () => {
      const { shareId } = await api.share(sessionId, chatId);
      setPreview(null);
      setLink(shareId ? shareUrl(shareId) : null);
    });
  const copy = (url: string) =>
    act(async () => {
      await navigator.clipboard.writeText(url);
      setState({ text: "Link copied", alert: false });
    });
  const revoke = () =>
    act(async () => {
      await api.unshare(sessionId, chatId);
      setLink(null);
      setState({ text: "The link no longer works", alert: false });
    });
  return (
    <div className="share">
      {link === null ? (
        <button type="button" onClick={() => void look()}>
          Share
        </button>
      ) : (
        <>
          <input readOnly aria-label="Share link" value={link} onFocus={(e) => e.currentTarget.select()} />
          <button type="button" onClick={() => void copy(link)}>
            Copy link
          </button>
          <button type="button" className="danger" onClick={() => void revoke()}>
            Stop sharing
          </button>
        </>
      )}
      {preview && (
        <Modal title="What the link will show" onClose={() => setPreview(null)}>
          <p className="muted">
            Anyone with the link can read this.{" "}
            {preview.redactions === 1
              ? "1 secret was redacted"
              : `${preview.redactions} secrets were redacted`}{" "}
            by its shape; a secret without a known shape is not.
          </p>
          <pre className="share-preview" aria-label="Shared transcript">
            {preview.markdown}
          </pre>
          <button type="button" onClick={() => void share()}>
            Create link
          </button>
          <button type="button" onClick={() => setPreview(null)}>
            Cancel
          </button>
        </Modal>
      )}
      {state && (
        <span role={state.alert ? "alert" : "status"} className={state.alert ? "form-error" : "muted"}>
          {state.text}
        </span>
      )}
    </div>
  );
}
