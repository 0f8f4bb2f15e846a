import { useState, type FormEvent } from "react";
import { errorMessage } from "../api/errors";
import type { AppConfig } from "../auth/config";
import { authorizeUrl } from "../auth/cognito";
import { localSignIn } from "../auth/local";
import type { Credentials } from "../auth/storage";

interface Props {
  config: AppConfig;
  onSignedIn: (credentials: Credentials) => void;
  /** A sign-in that failed before this screen (a bad Cognito callback). */
  initialError?: string | null;
}

function LocalForm({ apiBase, onSignedIn }: { apiBase: string; onSignedIn: Props["onSignedIn"] }) {
  const [user, setUser] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (event: FormEvent) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      onSignedIn(await localSignIn(apiBase, user.trim(), name.trim() || undefined));
    } catch (failure) {
      setError(errorMessage(failure));
      setBusy(false);
    }
  };
  return (
    <form onSubmit={submit} className="form">
      <p className="muted">Local mode: pick any user name; the local server mints a token for it.</p>
      <label htmlFor="signin-user">User name</label>
      <input
        id="signin-user"
        value={user}
        onChange={(event) => setUser(event.target.value)}
        required
        pattern="[\w.@\-]+"
        maxLength={64}
        autoComplete="username"
        aria-describedby="signin-user-hint"
        aria-invalid={error ? true : undefined}
      />
      <p id="signin-user-hint" className="hint">
        Letters, digits, “.”, “@”, “-” and “_”.
      </p>
      <label htmlFor="signin-name">Full name (optional, for branch initials)</label>
      <input
        id="signin-name"
        value={name}
        onChange={(event) => setName(event.target.value)}
        maxLength={200}
        autoComplete="name"
      />
      {error && (
        <p role="alert" className="form-error">
          {error}
        </p>
      )}
      <button type="submit" className="primary" disabled={busy || !user.trim()}>
        Sign in
      </button>
    </form>
  );
}

export function SignIn({ config, onSignedIn, initialError }: Props) {
  const [error, setError] = useState(initialError ?? null);
  const hostedUi = async () => {
    if (config.mode !== "aws") return;
    try {
      window.location.assign(await authorizeUrl(config));
    } catch (failure) {
      setError(errorMessage(failure));
    }
  };
  return (
    <main className="signin" id="main">
      <h1>Open Agents</h1>
      {config.mode === "local" ? (
        <LocalForm apiBase={config.apiBase} onSignedIn={onSignedIn} />
      ) : (
        <button type="button" className="primary" onClick={hostedUi}>
          Sign in
        </button>
      )}
      {error && (
        <p role="alert" className="form-error">
          {error}
        </p>
      )}
    </main>
  );
}
