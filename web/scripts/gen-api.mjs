// Writes src/api/schema.gen.ts (types only) from the API's committed OpenAPI schema,
// docs/openapi.json. It runs before dev, build, lint and test, so the client in src/api is always
// type-checked against the current schema: an API change that breaks it fails `tsc`.
import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import openapiTS, { astToString } from "openapi-typescript";

const SCHEMA = new URL("../../docs/openapi.json", import.meta.url);
const OUTPUT = new URL("../src/api/schema.gen.ts", import.meta.url);
const HEADER = "// Generated from docs/openapi.json by `npm run gen:api`. Do not edit.\n\n";

const schema = JSON.parse(await readFile(SCHEMA, "utf8"));
await writeFile(OUTPUT, HEADER + astToString(await openapiTS(schema)));
console.log(`wrote ${fileURLToPath(OUTPUT)}`);
