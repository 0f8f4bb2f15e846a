import { useEffect, useState } from "react";
import { useApi } from "../../api/context";
import type { Part } from "./message";

/** A user message's file part: an image as a thumbnail (its bytes fetched with the token),
 * a text file as a chip with its name. */
export function FileView({ part }: { part: Part }) {
  const api = useApi();
  const url = typeof part.url === "string" ? part.url : "";
  const mediaType = typeof part.mediaType === "string" ? part.mediaType : "";
  const name = typeof part.filename === "string" && part.filename ? part.filename : "attachment";
  const image = mediaType.startsWith("image/");
  const [src, setSrc] = useState<string | null>(null);
  const [failed, setFailed] = useState(false);
  useEffect(() => {
    if (!image || !url) return;
    let object: string | null = null;
    let live = true;
    api.attachmentBlob(url).then(
      (blob) => {
        if (!live) return;
        object = URL.createObjectURL(blob);
        setSrc(object);
      },
      () => live && setFailed(true),
    );
    return () => {
      live = false;
      if (object) URL.revokeObjectURL(object);
    };
  }, [api, image, url]);
  if (image && src) return <img className="attachment-thumb" src={src} alt={name} />;
  return (
    <span className="file-chip">
      {name}
      {image && !failed ? " (loading…)" : ""}
      {failed ? " (unavailable)" : ""}
    </span>
  );
}
