// The playground's build: `vite build web` (part of `npm run build`) writes static files to
// web/dist, which the server serves at /playground. No framework, no CDN, no web fonts: the
// bundle is the page's own TypeScript plus marked and DOMPurify.
import { defineConfig } from "vite";

export default defineConfig({
  base: "/playground/",
  logLevel: "warn",
  build: {
    outDir: "dist",
    emptyOutDir: true,
    target: "es2022",
    // One small bundle; gzip sizes are not worth the build time on every `npm ci`.
    reportCompressedSize: false,
  },
});
