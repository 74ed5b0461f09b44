// Relative asset paths, so the built page loads from whatever static server serves dist/.
export default { base: './', build: { outDir: 'dist', emptyOutDir: true } };
