// npm's `prepare`: builds dist/ when the package is installed from a checkout
// (`npm install --install-links path/to/clients/typescript`), where npm runs this
// script without having installed the package's own dependencies first; and after
// `npm ci` here, where they are installed already.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';

const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const options = { stdio: 'inherit', cwd: new URL('..', import.meta.url) };
if (!existsSync(new URL('../node_modules/typescript/bin/tsc', import.meta.url))) {
  execFileSync(npm, ['install', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], options);
}
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json'], options);
