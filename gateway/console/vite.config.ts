import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

// The console is served by the gateway from dist/ (same origin as the API, so the session cookie and
// the CSRF Origin check just work). `npm run dev -w gateway/console` proxies the API to a local gateway.
export default defineConfig({
  plugins: [react()],
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: false, chunkSizeWarningLimit: 400 },
  server: { proxy: { '/v1': process.env.CONSOLE_API ?? 'http://127.0.0.1:3000' } },
});
