// Schemas built by hand for tests, as replicagen would declare them.
import { Kind, NO_QUANT, Schema, StructType, type Field, type Quant, type Type } from "../src/schema.js";

export function ty(kind: number, extra: Partial<Type> = {}): Type {
  return { kind, quant: NO_QUANT, struct: null, elem: null, key: 0, ...extra };
}

export function quant(q: Partial<Quant> & { mode: 0 | 1 | 2 }): Quant {
  return { step: 0, min: 0, nbits: 0, ...q };
}

export function field(id: number, name: string, type: Type, extra: Partial<Field> = {}): Field {
  return { id, name, type, vis: 3, life: 0, chan: 0, deprecated: false, band: 0, leaf: 0, ...extra };
}

export function struct(name: string, fields: Field[], cls?: { id: number; distances?: number[] }): StructType {
  const s = new StructType(name);
  s.fields = fields;
  if (cls) {
    s.isClass = true;
    s.classId = cls.id;
    s.distances = cls.distances ?? [];
  }
  return s;
}

/** §9's schema: class Unit (ID 1) with 1 hp: int16 and 2 x: float32. */
export function unitSchema(): Schema {
  return new Schema([struct("Unit", [field(1, "hp", ty(Kind.Int16)), field(2, "x", ty(Kind.Float32))], { id: 1 })]);
}

/** §9.6's schema: class Bag (ID 2) with 1 l: list<int32>. */
export function bagSchema(): Schema {
  return new Schema([struct("Bag", [field(1, "l", ty(Kind.List, { elem: ty(Kind.Int32) }))], { id: 2 })]);
}
