import { Empty, PageHeader } from '../../components/ui';

export default function DomainDetail() {
  return (
    <>
      <PageHeader title="DomainDetail" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
