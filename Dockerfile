# One image for every service; docker-compose.yml runs it once per service with `ingress start --services …`.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
# npm ci's postinstall applies patches/ (patch-package): kafkajs's retry per partition (docs/kafka.md).
COPY patches ./patches
COPY services ./services
COPY schemas ./schemas
RUN npm ci --no-audit --no-fund && npm prune --omit=dev

FROM node:24-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY schemas ./schemas
# DATA_DIR: admin-api.json (how `docker compose exec … ingress …` finds the running service) and replay jobs on
# the production backends, everything on the embedded ones. /app is root's; the service runs as node. A volume, so
# each container keeps its own across restarts (made from this directory, so owned by node as well).
ENV DATA_DIR=/app/data
RUN mkdir -p /app/data && chown node:node /app/data
VOLUME /app/data
USER node
# 8080: the hooks; 8081: /healthz, /readyz and the management API (ADMIN_PORT). The admin port listens on
# ADMIN_HOST, loopback unless configured: an orchestrator probing from outside the container (Kubernetes
# httpGet, a published port) needs ADMIN_HOST=0.0.0.0, and then ADMIN_TOKENS guard the API
# (docs/management-api.md). The health check runs inside the container, on whichever address it listens.
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "const p=process.env.ADMIN_PORT||'8081';if(p==='0')process.exit(0);let h=process.env.ADMIN_HOST||'127.0.0.1';if(h==='0.0.0.0'||h==='::')h='127.0.0.1';if(h.includes(':'))h='['+h+']';fetch('http://'+h+':'+p+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/services/cli/main.js"]
CMD ["start"]
