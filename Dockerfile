# One image for every service; docker-compose.yml runs it once per service with `ingress start --services …`.
FROM node:24-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
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
USER node
# 8080: the hooks; 8081: /healthz and /readyz (ADMIN_PORT) for the orchestrator's probes.
EXPOSE 8080 8081
HEALTHCHECK --interval=10s --timeout=3s CMD node -e "const p=process.env.ADMIN_PORT||'8081';if(p==='0')process.exit(0);fetch('http://127.0.0.1:'+p+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
ENTRYPOINT ["node", "dist/services/cli/main.js"]
CMD ["start"]
