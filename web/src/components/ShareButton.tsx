import { useState } from "react";
import { shareUrl } from "../api/client";
import { useApi } from "../api/context";
import { errorMessage } from "../api/errors";

interface Props {
  sessionId: string;
  chatId: string;
}

/** Share the chat: a public read-only link to copy, and a way to revoke it. */
export function ShareButton({ sessionId, chatId }: Props) {
  const api = useApi();
  const [link, setLink] = useState<string | null>(null);
  const [state, setState] = useState<{ text: string; alert: boolean } | null>(null);
  const act = async (action: () => Promise<void>) => {
    setState(null);
    try {
      await action();
    } catch (failure) {
      setState({ text: errorMessage(failure), alert: true });
    }
  };
  const share = () =>
    act(async () => {
      const { shareId } = await api.share(sessionId, chatId);
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
        <button type="button" onClick={() => void share()}>
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
      {state && (
        <span role={state.alert ? "alert" : "status"} className={state.alert ? "form-error" : "muted"}>
          {state.text}
        </span>
      )}
    </div>
  );
}
