// Loads mnemo's contract from the repository's proto/ directory at run time.
//
// Nothing here is generated or copied: proto-loader parses proto/mnemo/v1/*.proto
// when a client is made, so the client speaks exactly the contract next to it.
// This module only finds and parses the files; converting values is codec.ts's job.

import * as fs from 'node:fs';
import * as path from 'node:path';
import * as protoLoader from '@grpc/proto-loader';

/** The file that imports every other mnemo proto file. */
export const SERVICE_PROTO = 'mnemo/v1/memory_service.proto';
/** The fully qualified name of mnemo's service. */
export const SERVICE_NAME = 'mnemo.v1.MemoryService';

// Compiled, this file is build/src/proto.js; the package root is two levels up
// and the repository's proto/ two levels above that (clients/node -> repo root).
const PACKAGE_ROOT = path.resolve(__dirname, '..', '..');
const REPOSITORY_PROTO_DIR = path.resolve(PACKAGE_ROOT, '..', '..', 'proto');

/**
 * How proto-loader turns messages into objects. `MnemoClient` relies on these:
 * camelCase field names, enums as their names, 64-bit integers as numbers
 * (every mnemo counter fits in 2^53), every field present (unset messages as
 * null) except the unset members of a oneof, repeated and map fields as
 * arrays and objects even when empty, and each oneof's name set to the name
 * of its member that is present.
 */
export const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: false,
  longs: Number,
  enums: String,
  defaults: true,
  arrays: true,
  objects: true,
  oneofs: true,
};

/**
 * The directory holding mnemo/v1/*.proto: `explicit` if given, else
 * $MNEMO_PROTO_DIR, else the repository's proto/ (this package lives in
 * clients/node). Throws when the chosen directory has no mnemo protos.
 */
export function resolveProtoDir(explicit?: string): string {
  const chosen = explicit ?? process.env.MNEMO_PROTO_DIR ?? REPOSITORY_PROTO_DIR;
  const dir = path.resolve(chosen);
  if (!fs.existsSync(path.join(dir, SERVICE_PROTO))) {
    const source = explicit !== undefined ? 'the protoDir option' : process.env.MNEMO_PROTO_DIR !== undefined ? 'MNEMO_PROTO_DIR' : 'the repository';
    throw new Error(`mnemo-client: no ${SERVICE_PROTO} under ${dir} (from ${source}); point protoDir or MNEMO_PROTO_DIR at mnemo's proto/ directory`);
  }
  return dir;
}

const loaded = new Map<string, protoLoader.PackageDefinition>();

/**
 * Parses mnemo's protos from `protoDir` (see `resolveProtoDir`), once per
 * directory. google/protobuf/timestamp.proto is not in proto/: protobufjs,
 * which proto-loader parses with, bundles the well-known types and resolves
 * `import "google/protobuf/..."` to them before searching `includeDirs`.
 */
export function loadContract(protoDir?: string): protoLoader.PackageDefinition {
  const dir = resolveProtoDir(protoDir);
  let definition = loaded.get(dir);
  if (definition === undefined) {
    definition = protoLoader.loadSync(SERVICE_PROTO, { ...LOADER_OPTIONS, includeDirs: [dir] });
    loaded.set(dir, definition);
  }
  return definition;
}
