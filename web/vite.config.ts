import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

// `npm run dev` proxies the API to a local `openagents dev` (OPENAGENTS_PORT, default 8000).
const apiPort = process.env.OPENAGENTS_PORT ?? "8000";

export default defineConfig({
  plugins: [react()],
  build: { outDir: "dist", sourcemap: true, target: "es2022" },
  server: { proxy: { "/api": `http://127.0.0.1:${apiPort}` } },
  test: {
    environment: "jsdom",
    globals: true,
    setupFiles: ["src/test/setup.ts"],
    include: ["src/**/*.test.{ts,tsx}"],
    // a whole test may wait on several conditions (see src/test/setup.ts) on a busy machine
    testTimeout: 30_000,
  },
});
