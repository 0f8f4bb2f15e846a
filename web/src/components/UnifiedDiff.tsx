/** The kind of one line of a unified diff (git's `diff` output). */
export type DiffLineKind = "added" | "removed" | "hunk" | "meta" | "context";

export function diffLineKind(line: string): DiffLineKind {
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+++ ") || line.startsWith("--- ")) return "meta";
  if (/^(diff --git |index |new file mode |deleted file mode |similarity |rename |Binary files )/.test(line))
    return "meta";
  if (line.startsWith("+")) return "added";
  if (line.startsWith("-")) return "removed";
  return "context";
}

/** A unified diff with its added, removed and hunk lines coloured (one span a line). */
export function UnifiedDiff({ diff, label }: { diff: string; label: string }) {
  const lines = diff.endsWith("\n") ? diff.slice(0, -1).split("\n") : diff.split("\n");
  return (
    <pre tabIndex={0} className="unified-diff" aria-label={label}>
      {lines.map((line, i) => (
        <span key={i} className={`diff-line diff-${diffLineKind(line)}`}>
          {line || " "}
        </span>
      ))}
    </pre>
  );
}
