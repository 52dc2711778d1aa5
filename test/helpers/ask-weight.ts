import ts from 'typescript';

/**
 * How many actor messages each route handler of a file sends, read from the
 * source with the TypeScript parser (for test/unit/area-shape.test.ts).
 *
 * A handler is the last argument of `app.get/post/put/patch/delete(...)`. Its
 * weight counts the `.ask(`/`.tell(` calls it makes that may change state,
 * including through the file's own helper functions it calls; a function
 * passed to `.map(`, or a call inside a loop, counts as many (2), since it
 * sends once per element. An ask marked `{ readOnly: true }` (a read the
 * cluster may safely repeat, as in a scatter-gather of a list's parts)
 * weighs nothing. A handler of weight 2 or more is an ask chain: the work
 * belongs in an actor or a flow.
 */
export interface HandlerWeight {
  method: string;
  path: string;
  weight: number;
  line: number;
}

const ROUTE_METHODS = new Set(['get', 'post', 'put', 'patch', 'delete']);

/** An ask whose options argument is an object literal with `readOnly: true`. */
function isReadOnly(call: ts.CallExpression): boolean {
  const options = call.arguments[3];
  if (!options || !ts.isObjectLiteralExpression(options)) return false;
  return options.properties.some(
    (property) => ts.isPropertyAssignment(property) && property.name.getText() === 'readOnly' && property.initializer.kind === ts.SyntaxKind.TrueKeyword,
  );
}

export function handlerWeights(fileName: string, text: string): HandlerWeight[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const named = new Map<string, ts.Node>();
  const collect = (node: ts.Node) => {
    if (ts.isFunctionDeclaration(node) && node.name && node.body) named.set(node.name.text, node.body);
    if (ts.isVariableDeclaration(node) && ts.isIdentifier(node.name) && node.initializer && (ts.isArrowFunction(node.initializer) || ts.isFunctionExpression(node.initializer))) {
      named.set(node.name.text, node.initializer.body);
    }
    ts.forEachChild(node, collect);
  };
  collect(source);

  const memo = new Map<ts.Node, number>();
  const weightOf = (body: ts.Node, visiting: Set<ts.Node>): number => {
    if (memo.has(body)) return memo.get(body)!;
    if (visiting.has(body)) return 0;
    visiting.add(body);
    let weight = 0;
    const visit = (node: ts.Node, many: boolean) => {
      if (ts.isCallExpression(node)) {
        const callee = node.expression;
        let own = 0;
        if (ts.isPropertyAccessExpression(callee) && (callee.name.text === 'ask' || callee.name.text === 'tell')) own = isReadOnly(node) ? 0 : 1;
        else if (ts.isIdentifier(callee) && named.has(callee.text)) own = weightOf(named.get(callee.text)!, visiting);
        weight += many ? own * 2 : own;
        const mapping = ts.isPropertyAccessExpression(callee) && ['map', 'flatMap', 'forEach', 'filter'].includes(callee.name.text);
        ts.forEachChild(node, (child) => visit(child, many || (mapping && child !== callee)));
        return;
      }
      const loop = ts.isForStatement(node) || ts.isForOfStatement(node) || ts.isForInStatement(node) || ts.isWhileStatement(node) || ts.isDoStatement(node);
      ts.forEachChild(node, (child) => visit(child, many || loop));
    };
    visit(body, false);
    visiting.delete(body);
    memo.set(body, weight);
    return weight;
  };

  const found: HandlerWeight[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isCallExpression(node) && ts.isPropertyAccessExpression(node.expression) && ROUTE_METHODS.has(node.expression.name.text)) {
      const [first] = node.arguments;
      const handler = node.arguments[node.arguments.length - 1];
      if (first && handler && node.arguments.length >= 2 && (ts.isArrowFunction(handler) || ts.isFunctionExpression(handler) || ts.isIdentifier(handler))) {
        const body = ts.isIdentifier(handler) ? named.get(handler.text) : handler.body;
        const path = ts.isStringLiteralLike(first) ? first.text : first.getText(source);
        if (body) found.push({ method: node.expression.name.text, path, weight: weightOf(body, new Set()), line: source.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}
