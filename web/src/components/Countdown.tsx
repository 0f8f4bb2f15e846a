import { useEffect, useState } from "react";
import type { StatusReading } from "../hooks/useSandboxStatus";
import { formatCountdown, msUntilHibernation } from "../lifecycle/status";

/** "Hibernates in m:ss", ticking every second on the server's clock. */
export function Countdown({ reading }: { reading: StatusReading }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const left = msUntilHibernation(reading.status, reading.receivedAt, now);
  if (left === null) return null;
  return <span className="countdown">Hibernates in {formatCountdown(left)}</span>;
}
