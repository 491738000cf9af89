// The command line of `npm run bench`, `drill` and `fuzz`: one parser, one integer check, one prepare step.
// A plain module with no dependencies: importable before prepare has installed anything.
import { parseArgs } from 'node:util';

/**
 * Parses `options` (plus --keep, --skip-prepare and --help, which every command has); prints the usage
 * and exits 2 on a bad option, 0 after --help. `integer(name, min, max)` reads an option as an integer
 * in range or exits 2 naming it.
 */
export function parseCommandLine({ tag, usage, options, allowPositionals = false }) {
  const say = (message) => process.stderr.write(`[${tag}] ${message}\n`);
  let parsed;
  try {
    parsed = parseArgs({
      allowPositionals,
      options: {
        ...options,
        keep: { type: 'boolean', default: false },
        'skip-prepare': { type: 'boolean', default: false },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (error) {
    say(`${error.message}\n${usage}`);
    process.exit(2);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    process.exit(0);
  }
  const integer = (name, min, max) => {
    const n = Number(values[name]);
    if (!Number.isInteger(n) || n < min || n > max) {
      say(`--${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(values[name])}`);
      process.exit(2);
    }
    return n;
  };
  return { values, positionals, integer, say };
}

/** Installs and builds as `npm start` does, unless --skip-prepare; exits 1 with the reason when that fails. */
export async function prepareUnlessSkipped(values, say) {
  if (values['skip-prepare']) return;
  try {
    const { prepare } = await import('../bin/prepare.mjs');
    await prepare();
  } catch (error) {
    say(error.message);
    process.exit(1);
  }
}
