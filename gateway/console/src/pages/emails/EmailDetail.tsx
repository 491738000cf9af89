import { Empty, PageHeader } from '../../components/ui';

export default function EmailDetail() {
  return (
    <>
      <PageHeader title="EmailDetail" />
      <Empty title="Coming in stage 1" />
    </>
  );
}
