import { useEffect, useMemo, useState } from "react";
import { createApi, createSharedApi } from "./api/client";
import { ApiContext } from "./api/context";
import { errorMessage } from "./api/errors";
import { createCall } from "./api/http";
import { completeSignIn, logoutUrl } from "./auth/cognito";
import { loadConfig, type AppConfig } from "./auth/config";
import { clearCredentials, loadCredentials, saveCredentials, type Credentials } from "./auth/storage";
import { SharedChat } from "./components/SharedChat";
import { SignIn } from "./components/SignIn";
import { Workspace } from "./components/Workspace";
import { sharedId } from "./router";

interface Boot {
  config: AppConfig;
  credentials: Credentials | null;
  error: string | null;
}

/** Config, then a finished Cognito callback or the stored credentials. */
async function boot(): Promise<Boot> {
  const config = await loadConfig();
  if (config.mode === "aws") {
    try {
      const fresh = await completeSignIn(config, new URL(window.location.href));
      if (fresh) {
        saveCredentials(fresh);
        window.history.replaceState(null, "", "/");
        return { config, credentials: fresh, error: null };
      }
    } catch (failure) {
      window.history.replaceState(null, "", "/");
      return { config, credentials: null, error: errorMessage(failure) };
    }
  }
  return { config, credentials: loadCredentials(), error: null };
}

export function App() {
  const [state, setState] = useState<Boot | null>(null);
  const [fatal, setFatal] = useState<string | null>(null);
  useEffect(() => {
    boot().then(setState, (failure: unknown) => setFatal(errorMessage(failure)));
  }, []);

  const config = state?.config;
  const token = state?.credentials?.token ?? null;
  const shareId = sharedId(window.location.pathname); // public: no sign-in
  const shared = useMemo(
    () =>
      config && shareId ? createSharedApi(createCall({ base: config.apiBase, token: () => null })) : null,
    [config, shareId],
  );
  const api = useMemo(() => {
    if (!config || !token) return null;
    const signOut = () => {
      clearCredentials();
      setState(
        (current) =>
          current && { ...current, credentials: null, error: "Your sign-in expired; sign in again." },
      );
    };
    return createApi(createCall({ base: config.apiBase, token: () => token, onUnauthorized: signOut }));
  }, [config, token]);

  if (fatal) return <p role="alert">The app could not start: {fatal}</p>;
  if (!state) return <p className="muted">Loading…</p>;
  if (shareId && shared) return <SharedChat shareId={shareId} api={shared} />;
  const signIn = (credentials: Credentials) => {
    saveCredentials(credentials);
    setState({ ...state, credentials, error: null });
  };
  if (!state.credentials || !api)
    return <SignIn config={state.config} onSignedIn={signIn} initialError={state.error} />;
  const signOut = () => {
    clearCredentials();
    if (state.config.mode === "aws") window.location.assign(logoutUrl(state.config));
    else setState({ ...state, credentials: null });
  };
  return (
    <ApiContext.Provider value={api}>
      <Workspace user={state.credentials.user} local={state.config.mode === "local"} onSignOut={signOut} />
    </ApiContext.Provider>
  );
}
