// Converts between proto-loader's objects and the plain values of types.ts.
//
// Driven by the message descriptors proto-loader parsed from proto/, so a
// field or an RPC added to the contract converts with no change here. It knows
// a few conventions and no particular message: enum values lose their prefix
// (ROLE_USER <-> 'USER'), google.protobuf.Timestamp <-> Date, a oneof is its
// one present member plus a discriminant named after the oneof, and a request
// with an unknown field or enum name is refused before anything is sent.

import type { PackageDefinition } from '@grpc/proto-loader';

const TIMESTAMP = 'google.protobuf.Timestamp';
const MESSAGE_FORMAT = 'Protocol Buffer 3 DescriptorProto';
const ENUM_FORMAT = 'Protocol Buffer 3 EnumDescriptorProto';

// The parts of protobufjs's descriptor objects (as proto-loader exposes them) read here.
interface FieldDescriptor {
  name: string; // camelCase, as in the objects proto-loader produces
  label: string; // LABEL_OPTIONAL | LABEL_REPEATED
  type: string; // TYPE_STRING, TYPE_ENUM, TYPE_MESSAGE...
  typeName: string; // relative to the message's scope, e.g. "SessionSettings"
}
interface MessageDescriptor {
  name: string;
  field: FieldDescriptor[];
  nestedType: MessageDescriptor[];
  oneofDecl: { name: string }[];
  options: { mapEntry?: boolean } | null;
}
interface EnumDescriptor {
  name: string;
  value: { name: string; number: number }[];
}

type Kind = 'scalar' | 'enum' | 'message' | 'timestamp';

interface FieldPlan {
  name: string;
  kind: Kind;
  protoType: string; // TYPE_*
  repeated: boolean;
  target: string; // the enum's or message's full name; '' for scalars
  mapValue: FieldPlan | null; // set for map fields: how to convert each value
}

interface EnumPlan {
  prefix: string; // e.g. "ROLE_"
  short: Map<string, string>; // ROLE_USER -> USER
  full: Map<string, string>; // USER -> ROLE_USER
}

type Plain = Record<string, unknown>;

/**
 * The buf STANDARD lint the contract passes makes every enum value start with
 * the enum's name in UPPER_SNAKE_CASE and the zero value end in _UNSPECIFIED,
 * so the zero value's name minus "UNSPECIFIED" is the prefix to strip.
 */
function enumPrefix(descriptor: EnumDescriptor): string {
  const zero = descriptor.value.find((v) => v.number === 0)?.name ?? '';
  return zero.endsWith('_UNSPECIFIED') ? zero.slice(0, -'UNSPECIFIED'.length) : '';
}

export class Codec {
  private readonly messages = new Map<string, FieldPlan[]>();
  private readonly enums = new Map<string, EnumPlan>();

  constructor(private readonly definition: PackageDefinition) {}

  /** The camelCase field names of message `typeName`, in field-number order of the .proto. */
  fieldNames(typeName: string): string[] {
    return this.plan(typeName).map((f) => f.name);
  }

  /** The short value names of enum `typeName`, e.g. ['UNSPECIFIED', 'USER', ...]. */
  enumValues(typeName: string): string[] {
    return [...this.enumPlan(typeName).full.keys()];
  }

  /** A proto-loader object of message `typeName` as plain values (enums short, timestamps Dates). */
  fromWire(typeName: string, value: unknown): unknown {
    if (value === null || value === undefined) return null;
    const wire = value as Plain;
    const out: Plain = {};
    for (const field of this.plan(typeName)) {
      // With `defaults`, proto-loader gives every field but the unset members of a oneof.
      if (!(field.name in wire)) continue;
      const v = wire[field.name];
      out[field.name] = field.repeated
        ? (Array.isArray(v) ? v : []).map((item) => this.decode(field, item))
        : field.mapValue !== null
          ? Object.fromEntries(Object.entries((v ?? {}) as Plain).map(([k, item]) => [k, this.decode(field.mapValue!, item)]))
          : this.decode(field, v);
    }
    // `oneofs` names the present member in a property named after the oneof;
    // names starting with '_' are the synthetic oneofs of proto3 `optional` fields.
    for (const { name } of this.descriptor<MessageDescriptor>(typeName, MESSAGE_FORMAT).oneofDecl) {
      if (!name.startsWith('_')) out[name] = wire[name] ?? null;
    }
    return out;
  }

  /**
   * Plain values as a proto-loader object of message `typeName`. Throws
   * TypeError, naming `path`, for an unknown field, a value of the wrong type or
   * an unknown enum name; `undefined` and `null` fields are left unset.
   */
  toWire(typeName: string, value: unknown, path: string): Plain {
    if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof Date) {
      throw new TypeError(`${path}: expected an object for ${typeName}`);
    }
    const plan = this.plan(typeName);
    const out: Plain = {};
    for (const [name, v] of Object.entries(value)) {
      if (v === undefined || v === null) continue;
      const field = plan.find((f) => f.name === name);
      if (field === undefined) {
        throw new TypeError(`${path}.${name}: ${typeName} has no field ${name} (fields: ${plan.map((f) => f.name).join(', ')})`);
      }
      const where = `${path}.${name}`;
      if (field.repeated) {
        if (!Array.isArray(v)) throw new TypeError(`${where}: expected an array`);
        out[name] = v.map((item, i) => this.encode(field, item, `${where}[${i}]`));
      } else if (field.mapValue !== null) {
        if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new TypeError(`${where}: expected an object of key/value pairs`);
        const mapValue = field.mapValue;
        out[name] = Object.fromEntries(Object.entries(v).map(([k, item]) => [k, this.encode(mapValue, item, `${where}[${JSON.stringify(k)}]`)]));
      } else {
        out[name] = this.encode(field, v, where);
      }
    }
    return out;
  }

  private decode(field: FieldPlan, v: unknown): unknown {
    switch (field.kind) {
      case 'enum':
        // A value this contract does not know (a newer daemon) stays as proto-loader gave it.
        return typeof v === 'string' ? (this.enumPlan(field.target).short.get(v) ?? v) : v;
      case 'timestamp': {
        if (v === null || v === undefined) return null;
        const { seconds, nanos } = v as { seconds: number; nanos: number };
        return new Date(Number(seconds) * 1000 + Math.floor(Number(nanos) / 1e6));
      }
      case 'message':
        return this.fromWire(field.target, v);
      case 'scalar':
        return v;
    }
  }

  private encode(field: FieldPlan, v: unknown, where: string): unknown {
    switch (field.kind) {
      case 'enum': {
        const plan = this.enumPlan(field.target);
        const full = typeof v === 'string' ? plan.full.get(v) : undefined;
        if (full === undefined) {
          throw new TypeError(`${where}: ${JSON.stringify(v)} is not one of ${[...plan.full.keys()].join(', ')}`);
        }
        return full;
      }
      case 'timestamp': {
        if (!(v instanceof Date) || Number.isNaN(v.getTime())) throw new TypeError(`${where}: expected a valid Date`);
        const ms = v.getTime();
        const seconds = Math.floor(ms / 1000);
        return { seconds, nanos: (ms - seconds * 1000) * 1e6 };
      }
      case 'message':
        return this.toWire(field.target, v, where);
      case 'scalar':
        checkScalar(field.protoType, v, where);
        return v;
    }
  }

  private plan(typeName: string): FieldPlan[] {
    let plan = this.messages.get(typeName);
    if (plan === undefined) {
      const descriptor = this.descriptor<MessageDescriptor>(typeName, MESSAGE_FORMAT);
      plan = descriptor.field.map((f) => this.fieldPlan(typeName, descriptor, f));
      this.messages.set(typeName, plan);
    }
    return plan;
  }

  private fieldPlan(scope: string, message: MessageDescriptor, field: FieldDescriptor): FieldPlan {
    const base = { name: field.name, protoType: field.type, repeated: field.label === 'LABEL_REPEATED', mapValue: null };
    if (field.type === 'TYPE_ENUM') {
      return { ...base, kind: 'enum', target: this.resolve(scope, field.typeName) };
    }
    if (field.type !== 'TYPE_MESSAGE') {
      return { ...base, kind: 'scalar', target: '' };
    }
    // A map<K, V> field is a repeated field of a nested *Entry message marked map_entry.
    const entry = message.nestedType.find((n) => n.name === field.typeName && n.options?.mapEntry);
    if (entry !== undefined) {
      const value = entry.field.find((f) => f.name === 'value');
      if (value === undefined) throw new Error(`mnemo-client: map entry ${scope}.${entry.name} has no value field`);
      return { ...base, kind: 'scalar', repeated: false, target: '', mapValue: this.fieldPlan(`${scope}.${entry.name}`, entry, value) };
    }
    const target = this.resolve(scope, field.typeName);
    return { ...base, kind: target === TIMESTAMP ? 'timestamp' : 'message', target };
  }

  /** Protobuf scoping: a name is looked up in the enclosing scopes, innermost first. */
  private resolve(scope: string, typeName: string): string {
    if (typeName.startsWith('.')) return typeName.slice(1);
    const parts = scope.split('.');
    for (let i = parts.length; i >= 0; i--) {
      const candidate = [...parts.slice(0, i), typeName].join('.');
      if (candidate in this.definition) return candidate;
    }
    throw new Error(`mnemo-client: cannot resolve type ${typeName} from ${scope}`);
  }

  private enumPlan(typeName: string): EnumPlan {
    let plan = this.enums.get(typeName);
    if (plan === undefined) {
      const descriptor = this.descriptor<EnumDescriptor>(typeName, ENUM_FORMAT);
      const prefix = enumPrefix(descriptor);
      const short = new Map<string, string>();
      const full = new Map<string, string>();
      for (const { name } of descriptor.value) {
        const s = prefix !== '' && name.startsWith(prefix) ? name.slice(prefix.length) : name;
        short.set(name, s);
        full.set(s, name);
      }
      plan = { prefix, short, full };
      this.enums.set(typeName, plan);
    }
    return plan;
  }

  private descriptor<T>(typeName: string, format: string): T {
    const entry = this.definition[typeName] as { format?: string; type?: unknown } | undefined;
    if (entry === undefined || entry.format !== format) {
      throw new Error(`mnemo-client: ${typeName} is not a ${format === ENUM_FORMAT ? 'enum' : 'message'} of the loaded contract`);
    }
    return entry.type as T;
  }
}

const INTEGER_TYPES = new Set(['TYPE_INT32', 'TYPE_INT64', 'TYPE_SINT32', 'TYPE_SINT64', 'TYPE_SFIXED32', 'TYPE_SFIXED64']);
const UNSIGNED_TYPES = new Set(['TYPE_UINT32', 'TYPE_UINT64', 'TYPE_FIXED32', 'TYPE_FIXED64']);

// protobufjs would quietly coerce or drop a value of the wrong type; a caller
// without TypeScript's checks gets an error instead.
function checkScalar(protoType: string, v: unknown, where: string): void {
  let ok: boolean;
  if (protoType === 'TYPE_STRING') ok = typeof v === 'string';
  else if (protoType === 'TYPE_BOOL') ok = typeof v === 'boolean';
  else if (protoType === 'TYPE_BYTES') ok = v instanceof Uint8Array;
  else if (protoType === 'TYPE_DOUBLE' || protoType === 'TYPE_FLOAT') ok = typeof v === 'number';
  else if (INTEGER_TYPES.has(protoType)) ok = Number.isSafeInteger(v);
  else if (UNSIGNED_TYPES.has(protoType)) ok = Number.isSafeInteger(v) && (v as number) >= 0;
  else ok = true;
  if (!ok) {
    const expected = protoType.replace(/^TYPE_/, '').toLowerCase();
    throw new TypeError(`${where}: ${JSON.stringify(v)} is not a valid ${expected}`);
  }
}
