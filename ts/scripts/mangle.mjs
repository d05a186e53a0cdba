// Computes the property names a minified bundle of the runtime may rename
// (esbuild's MangleProps): every property name declared or used in src/
// that is not part of the public API (what index.ts exports and the types
// reachable from it, private and @internal members excepted), not read or
// written on a library's object (as the type checker resolves it), not an
// enum member (esbuild inlines enums by name), and not a string literal
// (which could index an object). The code bundled with the runtime under
// the same renaming (internal/tsnode/driver.ts and canon.ts) is checked
// the same way: what it reads on a library's object keeps its name. The
// list is written to mangle.json; `node scripts/mangle.mjs --check` fails
// if it is stale. internal/tsnode reads it (the bench's bundle_bytes, the
// cross-language test's driver). The page bundle of internal/web is not
// mangled; were it, web/app.ts would join the driver here.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
const src = path.join(dir, "src");
const files = fs.readdirSync(src).filter((f) => f.endsWith(".ts")).map((f) => path.join(src, f));
const bundled = ["driver.ts", "canon.ts"].map((f) => path.join(dir, "..", "internal", "tsnode", f));

const reserved = new Set();
const program = ts.createProgram([...files, ...bundled], {
  target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler,
  lib: ["lib.es2022.d.ts", "lib.dom.d.ts"], types: ["node"], strict: true, skipLibCheck: true, verbatimModuleSyntax: true,
  isolatedModules: true, noEmit: true, paths: { "@replicago/replica": [path.join(src, "index.ts")] },
});
const checker = program.getTypeChecker();
const inBundle = (f) => files.includes(path.normalize(f)) || bundled.includes(path.normalize(f));
const ours = (decls) => decls !== undefined && decls.length > 0 && decls.every((d) => inBundle(d.getSourceFile().fileName));

// The public API: the members of what index.ts exports, and of every type
// reachable from them (properties, signatures, type arguments), except
// private, #private and @internal members (protected ones are kept: the
// generated classes use them).
const hidden = (d) =>
  (ts.getCombinedModifierFlags(d) & ts.ModifierFlags.Private) !== 0 ||
  (d.name && ts.isPrivateIdentifier(d.name)) ||
  ts.getJSDocTags(d).some((t) => t.tagName.text === "internal") ||
  /@internal/.test(d.getFullText().slice(0, d.getLeadingTriviaWidth()));
const seenTypes = new Set();
const visitType = (type) => {
  if (!type || seenTypes.has(type)) return;
  seenTypes.add(type);
  if (type.isUnionOrIntersection()) for (const t of type.types) visitType(t);
  for (const t of checker.getTypeArguments?.(type) ?? []) visitType(t);
  if (type.aliasTypeArguments) for (const t of type.aliasTypeArguments) visitType(t);
  for (const sig of [...type.getCallSignatures(), ...type.getConstructSignatures()]) {
    if (sig.declaration && hidden(sig.declaration)) continue; // a private constructor
    for (const p of sig.getParameters()) visitType(checker.getTypeOfSymbol(p));
    visitType(sig.getReturnType());
  }
  const idx = type.getStringIndexType?.() ?? undefined;
  if (idx) visitType(idx);
  for (const b of type.getBaseTypes?.() ?? []) visitType(b);
  for (const prop of checker.getPropertiesOfType(type)) {
    const decls = prop.declarations ?? [];
    if (!decls.every((d) => files.includes(path.normalize(d.getSourceFile().fileName)))) continue;
    if (decls.every(hidden)) continue;
    reserved.add(prop.name);
    visitType(checker.getTypeOfSymbol(prop));
  }
};
const index = program.getSourceFile(path.join(src, "index.ts"));
for (const sym of checker.getExportsOfModule(checker.getSymbolAtLocation(index))) {
  const s = sym.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(sym) : sym;
  if (s.flags & ts.SymbolFlags.Value) visitType(checker.getTypeOfSymbol(s));
  if (s.flags & ts.SymbolFlags.Type) visitType(checker.getDeclaredTypeOfSymbol(s));
}

// Whether string literal n is a value of one of our string-literal types
// (an ErrorCode, an ItemKind), as a type, an argument or a comparison
// operand, and so never indexes an object.
const ourLiterals = (t) =>
  t !== undefined && ours(t.aliasSymbol?.declarations) && (t.isUnion() ? t.types : [t]).every((x) => x.isStringLiteral());
const valueLiteral = (n) => {
  const p = n.parent;
  if (ts.isLiteralTypeNode(p)) return true;
  if (ourLiterals(checker.getContextualType(n))) return true;
  const eq = [ts.SyntaxKind.EqualsEqualsEqualsToken, ts.SyntaxKind.ExclamationEqualsEqualsToken];
  return ts.isBinaryExpression(p) && eq.includes(p.operatorToken.kind) && ourLiterals(checker.getTypeAtLocation(p.left === n ? p.right : p.left));
};

// Property names declared or used in the sources (the candidates), and those
// that keep their names wherever the bundle uses them.
const candidates = new Set();
for (const sf of program.getSourceFiles()) {
  if (!inBundle(sf.fileName)) continue;
  const isSrc = files.includes(path.normalize(sf.fileName));
  const candidate = (name) => isSrc && candidates.add(name);
  const visit = (n) => {
    if ((ts.isStringLiteral(n) || ts.isNoSubstitutionTemplateLiteral(n)) && /^[A-Za-z_$][\w$]*$/.test(n.text) && !valueLiteral(n)) reserved.add(n.text);
    if (ts.isPropertyAccessExpression(n) && ts.isIdentifier(n.name)) {
      // A property of a library's object (or of an untyped one) keeps its
      // name; so does an enum member, which esbuild inlines only by name.
      const sym = checker.getSymbolAtLocation(n.name);
      if (sym && sym.flags & ts.SymbolFlags.EnumMember) reserved.add(n.name.text);
      else if (ours(sym?.declarations)) candidate(n.name.text);
      else reserved.add(n.name.text);
    }
    if (ts.isObjectLiteralExpression(n)) {
      // An object literal given to a library keeps the names the library reads.
      const c0 = checker.getContextualType(n);
      const ctx = c0 && checker.getNonNullableType(c0);
      for (const p of n.properties) {
        if (!p.name || !ts.isIdentifier(p.name) || ctx === undefined) continue;
        const want = ctx.getProperty(p.name.text);
        if (!want || ours(want.declarations)) continue;
        reserved.add(p.name.text);
      }
    }
    if ((ts.isPropertyDeclaration(n) || ts.isMethodDeclaration(n) || ts.isPropertyAssignment(n) || ts.isPropertySignature(n) ||
      ts.isMethodSignature(n) || ts.isGetAccessor(n) || ts.isSetAccessor(n)) && n.name && ts.isIdentifier(n.name)) candidate(n.name.text);
    if (ts.isShorthandPropertyAssignment(n)) candidate(n.name.text);
    if (ts.isBindingElement(n) && n.propertyName && ts.isIdentifier(n.propertyName)) candidate(n.propertyName.text);
    if (ts.isBindingElement(n) && !n.propertyName && ts.isIdentifier(n.name) && ts.isObjectBindingPattern(n.parent)) candidate(n.name.text);
    if (ts.isParameter(n) && ts.isIdentifier(n.name) && n.modifiers?.some((m) => m.kind !== ts.SyntaxKind.Decorator)) candidate(n.name.text);
    ts.forEachChild(n, visit);
  };
  visit(sf);
}
const props = [...candidates].filter((p) => !reserved.has(p)).sort();
const out = JSON.stringify({ props }, null, 1) + "\n";
const file = path.join(dir, "mangle.json");
if (process.argv.includes("--check")) {
  if (fs.readFileSync(file, "utf8") !== out) {
    console.error("ts/mangle.json is stale: run node scripts/mangle.mjs");
    process.exit(1);
  }
} else {
  fs.writeFileSync(file, out);
  console.log(`${props.length} internal property names`);
}
