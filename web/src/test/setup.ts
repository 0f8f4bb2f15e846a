import "@testing-library/jest-dom/vitest";
import { cleanup, configure } from "@testing-library/react";
import { afterEach } from "vitest";

// findBy*/waitFor wait on a condition; on a busy CI machine a render can take well over the
// library's default second, so the ceiling is generous (a passing wait returns at once).
configure({ asyncUtilTimeout: 10_000 });

afterEach(() => cleanup());
