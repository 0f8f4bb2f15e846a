/** A UI message as the views draw it: its parts are the AI SDK's, read loosely (a part type
 * this app does not know is still carried, and drawn as nothing). */
export interface Part {
  type: string;
  text?: string;
  state?: string;
  data?: unknown;
  [key: string]: unknown;
}

export interface ViewMessage {
  id: string;
  role: string;
  parts: Part[];
  metadata?: unknown;
}
