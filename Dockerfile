# The Account API's image (D14): the API, the settlement worker, the webhooks process and the CLI,
# as compiled JavaScript, with production dependencies only, run by a non-root user. Node 24, the
# newest LTS line and the one CI tests on (D11).

FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --include=dev --ignore-scripts
COPY tsconfig.json ./
COPY scripts/programs.mjs scripts/build.mjs scripts/build-console.mjs ./scripts/
COPY src ./src
COPY workers ./workers
COPY migrations ./migrations
# The console (D20): its browser code, and the client package's sources it is built from.
COPY console ./console
COPY packages/client/src ./packages/client/src
RUN node scripts/build.mjs dist
# Then down to production dependencies. npm keeps TypeScript even so, as the optional peer of a
# schema library bull-board depends on (valibot), which never loads it: it goes by hand.
RUN npm prune --omit=dev --ignore-scripts \
  && rm -rf node_modules/typescript node_modules/.bin/tsc node_modules/.bin/tsserver

FROM node:24-bookworm-slim AS runtime
# MALLOC_MMAP_THRESHOLD_: what scripts/programs.mjs sets for the API, and why.
ENV NODE_ENV=production PORT=8080 MALLOC_MMAP_THRESHOLD_=1048576
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
USER node
EXPOSE 8080
# Ready means PostgreSQL and Redis answer (D9), not that a port is open.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 8080) + '/readyz').then((r) => process.exit(r.status === 200 ? 0 : 1), () => process.exit(1))"]
CMD ["node", "--max-old-space-size=512", "--max-semi-space-size=8", "dist/src/main.js"]
