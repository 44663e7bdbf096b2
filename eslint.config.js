// Lint configuration: typescript-eslint's recommended rules over src/, test/, bench/ and scripts/.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'dist.*/**',
      'node_modules/**',
      'coverage/**',
      '.tap/**',
      'fixtures/**',
      'guest-sdk/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { languageOptions: { globals: { ...globals.node } } },
  // the workbench page runs in the browser
  { files: ['src/workbench/**/*.{ts,tsx}'], languageOptions: { globals: { ...globals.browser } } },
  // the launchers are CommonJS (bin/package.json): an ES module entry would load Node's ESM loader
  {
    files: ['bin/**/*.js'],
    languageOptions: { sourceType: 'commonjs' },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-constant-condition': ['error', { checkLoops: false }],
    },
  },
);
